"""What every cluster strategy is built from, in one place (import from the submodules):

* :mod:`~dubbo_py.cluster.support.context` -- :class:`ClusterContext` and the protocols of the
  parts it composes (the provider call, the chain source, quarantine, retry budget, failback
  queue), and the ``Strategy`` / ``AsyncStrategy`` types;
* :mod:`~dubbo_py.cluster.support.deadline` -- :class:`Deadline`, when a call must be over;
* :mod:`~dubbo_py.cluster.support.outcome` -- how a failure is classified (transport, shed,
  call failure, application answer), whether it may be retried, what the caller sees;
* :mod:`~dubbo_py.cluster.support.routing` -- routing a call, how many attempts it may make,
  and :class:`Attempts`, one retrying call's bookkeeping.

None of them does I/O: the blocking and asyncio forms of a strategy both use them.
"""
