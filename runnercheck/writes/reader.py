"""What another tool reads of ``migrate``'s writes: the journals an interrupted run left
(:func:`pending`, each one a half-applied group or a note) and the shared tree lock that
waits for a run writing the tree (:func:`reading`). ``check`` reads them through this
module only; the journal's format and the lock's implementation stay the writes
package's own.
"""

from __future__ import annotations

from runnercheck.writes.journal import Pending, pending
from runnercheck.writes.treelock import reading

__all__ = ["Pending", "pending", "reading"]
