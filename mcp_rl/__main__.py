from mcp_rl.cli import main

main()
