from agent_ls.cli import main

raise SystemExit(main())
