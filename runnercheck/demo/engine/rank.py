"""One rank's process: ``python -m runnercheck.demo.engine.rank RANK SPEC INIT RESULT``."""

import pickle
import sys

from runnercheck.demo.engine.launcher import rank_main


def main(argv: list) -> int:
    rank, spec_file, init_method, result_file = argv
    with open(spec_file, "rb") as handle:
        spec = pickle.load(handle)
    return rank_main(int(rank), spec, init_method, result_file)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
