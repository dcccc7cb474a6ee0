"""The product's operations as library functions: simulate, judge, score, report, run a matrix, import.

Each function takes typed inputs (config models, a run folder or `Run` handle) and returns a typed
result; it prints nothing and never calls `sys.exit`. The CLI (`usersimcrs.cli`) only parses
arguments, calls one of these and prints; the public API (`usersimcrs/__init__.py`) re-exports them.
Nothing here imports `usersimcrs.cli`.
"""
