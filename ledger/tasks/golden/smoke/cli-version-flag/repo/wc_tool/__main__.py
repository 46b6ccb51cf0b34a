from wc_tool.cli import main

raise SystemExit(main())
