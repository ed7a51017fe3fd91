"""The error of a privacy ledger whose claim does not hold, in a module of its own.

Every ledger raises it: the per-run task ledger (:mod:`dpcl.privacy.ledger`, which re-exports it
as ``dpcl.privacy.ledger.LedgerError``) and the per-record group ledgers of the systems above this
package (``dpcl.active.group_ledger``). Kept apart so that a group ledger needs nothing from the task
ledger.
"""

from __future__ import annotations


class LedgerError(ValueError):
    """A ledger entry or a whole ledger whose claim does not hold or cannot be checked."""
