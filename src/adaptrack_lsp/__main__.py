from adaptrack_lsp.cli import main

raise SystemExit(main())
