"""The journal as a transparency log others can follow (docs/PUBLISHING.md): a static C2SP
tlog-tiles directory (``writer``), what reads one back (``source``, ``monitor``), and the HTTP
servers for it and for a C2SP tlog-witness (``http``)."""
