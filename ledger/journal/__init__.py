"""The journal: canonical entries, an RFC 6962 Merkle tree in SQLite, signed checkpoints."""
