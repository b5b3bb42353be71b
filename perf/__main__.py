from perf.cli import main

raise SystemExit(main())
