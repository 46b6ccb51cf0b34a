"""Key material never enters the journal: a `cmd:` agent that prints the harness's keys."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from click.testing import CliRunner

from attest.attestation import COMMITMENT_KEY_LABEL
from attest.redact import SECRET_MARKER, scrub_secrets, secret_patterns
from cli.main import cli
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from tests.run.minitasks import make_ledger


def _forms(raw: bytes) -> list[str]:
    return [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("=")]


def test_scrub_removes_every_form_and_nothing_else() -> None:
    """Hex, base64 and raw forms of a secret are replaced; other text stays as it was."""
    secret = bytes(range(1, 33))
    pats = secret_patterns([secret], ["PRIVATE+KEY+x+00000000+AQID"])
    for form in [*_forms(secret), secret.decode("latin-1")]:
        assert scrub_secrets(f"a {form} b {form}", pats) == f"a {SECRET_MARKER} b {SECRET_MARKER}"
    assert scrub_secrets("nothing secret here " + secret.hex()[:20], pats).endswith(secret.hex()[:20])


def test_agent_printing_the_keys_leaves_no_key_bytes_in_the_journal(tmp_path: Path) -> None:
    """An operator's cmd: agent prints (and writes) copied key bytes; the journal holds none."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    runner = CliRunner()
    assert runner.invoke(cli, ["--ledger", str(home), "keys", "init"]).exit_code == 0
    keys = load_keys(home / "keys")
    secrets = [keys.master_secret, keys.signer.seed, keys.subkey(COMMITMENT_KEY_LABEL)]
    printed = [f for s in secrets for f in _forms(s)] + [keys.signer.skey,
                                                         (home / "keys" / "master.key").read_text().strip()]
    script = tmp_path / "leaky.py"
    script.write_text(
        "import sys\n"
        f"forms = {printed!r}\n"
        f"raw = {keys.master_secret!r}\n"
        "for f in forms:\n    print('key:', f)\n    print('key:', f, file=sys.stderr)\n"
        "sys.stdout.flush()\nsys.stdout.buffer.write(b'raw:' + raw + b'\\n')\n"
        "open('leak.txt', 'w').write('\\n'.join(forms))\n")
    res = runner.invoke(cli, ["--ledger", str(home), "run", "--json", "--task", "fix-sub", "--trace", "none",
                              "--agent", f"cmd:{sys.executable} {script}"])
    assert res.exit_code == 0, res.output
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries())
    blob = b"".join(e.raw for e in entries)
    text = json.dumps([e.as_json() for e in entries])
    outputs = " ".join(e.data.get("text", "") for e in entries if e.kind == "agent.output")
    assert "key:" in outputs and SECRET_MARKER in outputs  # the agent ran and was captured
    for form in printed:
        assert form not in text and form.encode() not in blob, form[:12]
    assert keys.master_secret not in blob
