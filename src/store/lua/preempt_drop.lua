-- SPDX-License-Identifier: MIT
-- a --preempt request of pk goes, by call: when it is taken (the acquire, the release
-- that handed the lock over) or withdrawn (its waiter left or was superseded), its fields
-- and the hand-over's a preempted holder's release wrote for it (from fstatus hist hret:
-- read only under handover 1; left, they named the preempted run for --history till the
-- key's end). taken... stay (status.lua: a preempted holder reads them).
call('HDEL', pk, 'token', 'host', 'pid', 'label', 'handover', 'from', 'fstatus', 'hist', 'hret')
