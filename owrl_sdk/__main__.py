from owrl_sdk.cli import main

main()
