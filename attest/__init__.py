"""Clean-run attestation: commitments to hidden ground truth, redaction, the scan, attestations.

    digests.py      normalization (tokens, windows, paths) and the keyed HMAC digests
    commitment.py   build_commitment(material, key=...) -> Commitment (digests + sealed counts)
    redact.py       Redactor(commitment, key): the run's CaptureFilter; MarkerScanner (key-free)
    scan.py         scan_attempt(entries, ...) -> ScanResult (activity digest, matches, verdict)
    attestation.py  build_attestation / verify_attestation (public-key, journal, secret-key levels)
    material.py     (I/O) read a Task's ground truth and public material from disk

Everything except material.py is pure: no I/O, no clock, no randomness, no
environment; keys, checkpoints, proofs and entries are parameters. See docs/ATTESTATION.md.
"""
