-- SPDX-License-Identifier: MIT
-- --preempt's request and hand-over fields of pk go, by call; taken... stay (status.lua)
call('HDEL', pk, 'token', 'host', 'pid', 'label', 'handover', 'from', 'fstatus', 'hist', 'hret')
