"""The security suite's table of attacks is printed by tests/conftest.py (security_support.print_table)."""
