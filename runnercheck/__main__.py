from runnercheck.cli import main

raise SystemExit(main())
