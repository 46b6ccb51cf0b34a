from stockctl.cli import main

raise SystemExit(main())
