"""``migrate``'s journaled, locked writes: no LibCST and no analysis in them.

:mod:`~runnercheck.writes.transaction` writes a change set as one transaction per
worker/runner group, in place (:mod:`~runnercheck.writes.write`), under the tree lock
(:mod:`~runnercheck.writes.treelock`), with a journal
(:mod:`~runnercheck.writes.journal`, written by
:mod:`~runnercheck.writes.journal_files`) that
:mod:`~runnercheck.writes.recovery` uses after a crash; signals and test faults take
effect at the named points of :mod:`~runnercheck.writes.checkpoints`. ``check`` reads
the journal and the lock too (RC003).
"""
