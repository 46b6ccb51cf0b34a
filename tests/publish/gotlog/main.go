// Checks a C2SP tlog-tiles directory with Go's golang.org/x/mod/sumdb/tlog (code this project
// did not write). Usage: gotlog DIR SIZE ROOT_BASE64 [OLD_SIZE...]
//
// Go's tile paths are tile/<H>/<L>/<N>[.p/<W>] with entries at tile/<H>/data/<N>; C2SP drops
// the height (always 8) and names the entries level "entries". The TileReader below maps one to
// the other; everything else (tile hashing, the tree hash, proofs) is Go's.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

type dirReader struct{ dir string }

func (r dirReader) Height() int { return 8 }

func c2spPath(t tlog.Tile) string {
	p := t.Path() // tile/8/L/N[.p/W] or tile/8/data/N[.p/W]
	p = strings.TrimPrefix(p, "tile/8/")
	p = strings.Replace(p, "data/", "entries/", 1)
	return filepath.Join("tile", p)
}

func (r dirReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := os.ReadFile(filepath.Join(r.dir, c2spPath(t)))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r dirReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	dir := os.Args[1]
	n, _ := strconv.ParseInt(os.Args[2], 10, 64)
	raw, err := base64.StdEncoding.DecodeString(os.Args[3])
	if err != nil || len(raw) != tlog.HashSize {
		fail("bad root")
	}
	var root tlog.Hash
	copy(root[:], raw)
	tree := tlog.Tree{N: n, Hash: root}
	hr := tlog.TileHashReader(tree, dirReader{dir})
	th, err := tlog.TreeHash(n, hr)
	if err != nil {
		fail("tree hash: %v", err)
	}
	if th != root {
		fail("tree hash %v != checkpoint root %v", th, root)
	}
	// every entry: its bundle slot hashes to the leaf hash Go reads (and verifies) from the tiles
	entries, markers := 0, 0
	for start := int64(0); start < n; start += 256 {
		w := n - start
		if w > 256 {
			w = 256
		}
		t := tlog.Tile{H: 8, L: -1, N: start / 256, W: int(w)}
		data, err := os.ReadFile(filepath.Join(dir, c2spPath(t)))
		if err != nil {
			fail("bundle %d: %v", t.N, err)
		}
		idx := make([]int64, w)
		for i := range idx {
			idx[i] = tlog.StoredHashIndex(0, start+int64(i))
		}
		leaves, err := hr.ReadHashes(idx)
		if err != nil {
			fail("leaves of bundle %d: %v", t.N, err)
		}
		for i := int64(0); i < w; i++ {
			if len(data) < 2 {
				fail("bundle %d truncated", t.N)
			}
			l := int(binary.BigEndian.Uint16(data))
			if len(data) < 2+l {
				fail("bundle %d truncated", t.N)
			}
			slot := data[2 : 2+l]
			data = data[2+l:]
			if len(slot) > 0 && slot[0] == 0 { // a marker: it names the leaf hash
				var named tlog.Hash
				copy(named[:], slot[2:2+tlog.HashSize])
				if named != leaves[i] {
					fail("marker at %d names another leaf", start+i)
				}
				markers++
				continue
			}
			if tlog.RecordHash(slot) != leaves[i] {
				fail("entry %d does not hash to its leaf", start+i)
			}
			entries++
		}
		if len(data) != 0 {
			fail("bundle %d has trailing bytes", t.N)
		}
	}
	// inclusion proofs of a spread of entries, consistency proofs from the given old sizes
	proved := 0
	for _, i := range []int64{0, n / 3, n / 2, n - 1} {
		p, err := tlog.ProveRecord(n, i, hr)
		if err != nil {
			fail("prove record %d: %v", i, err)
		}
		leaf, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
		if err != nil {
			fail("leaf %d: %v", i, err)
		}
		if err := tlog.CheckRecord(p, n, root, i, leaf[0]); err != nil {
			fail("check record %d: %v", i, err)
		}
		proved++
	}
	consistent := 0
	for _, a := range os.Args[4:] {
		old, _ := strconv.ParseInt(a, 10, 64)
		oh, err := tlog.TreeHash(old, hr)
		if err != nil {
			fail("tree hash at %d: %v", old, err)
		}
		p, err := tlog.ProveTree(n, old, hr)
		if err != nil {
			fail("prove tree %d: %v", old, err)
		}
		if err := tlog.CheckTree(p, n, root, old, oh); err != nil {
			fail("check tree %d: %v", old, err)
		}
		consistent++
	}
	out, _ := json.Marshal(map[string]interface{}{"size": n, "root": th.String(), "entries": entries,
		"markers": markers, "inclusion_proofs": proved, "consistency_proofs": consistent})
	fmt.Println(string(out))
}
