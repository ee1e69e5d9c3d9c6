-- SPDX-License-Identifier: MIT
-- a --preempt request withdrawn (its waiter left or was superseded): the request's fields
-- of pk go, by call; the hand-over's (preempt_drop.lua) and taken... stay
call('HDEL', pk, 'token', 'host', 'pid', 'label', 'handover')
