-- SPDX-License-Identifier: MIT
-- a --preempt request withdrawn (its waiter left or was superseded): the request's fields
-- of pk go, by call, and so do the hand-over's a preempted holder's release wrote for it
-- (from fstatus hist hret, as preempt_drop.lua): read only under handover 1, which goes
-- here; left, they named the preempted run for --history (history_read.lua) till the
-- key's end. taken... stay (status.lua: a preempted holder reads them).
call('HDEL', pk, 'token', 'host', 'pid', 'label', 'handover', 'from', 'fstatus', 'hist', 'hret')
