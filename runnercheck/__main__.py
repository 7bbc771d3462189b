from runnercheck.cli import entry

entry()
