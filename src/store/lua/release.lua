-- SPDX-License-Identifier: MIT
-- Release: delete only our own lock and wake waiters in the same step, so no
-- waiter can miss the notification; with keep_ms > 0 (--min-hold) let it expire.
-- With a fair queue, only its head is woken (its own channel); else one plain waiter
-- (wake_one.lua), and the release channel is told for everyone else who listens there
-- (requests of other modes, Redlock waiters, older rlocks).
-- KEYS: lock owner
-- ARGV: token keep_ms channel publish wake_prefix [done_ms [status [hist hret [lost [lease]]]]]
-- (lease, with the history: "taken" or a number, history.lua's history_taken: a lock
-- found gone sooner than its lease could end was taken away, the run ends lost)
-- (lost: "lost" when rlock declared the lease lost by its own clock and exits 79: the
-- lock, still its own, is released all the same, and the run ends lost, not released;
-- "seen" when rlock found the lease lost while the command ran and went on (--on-lost
-- ignore): released as "" is, but a node where it no longer holds keeps its lock-delay;
-- "preempted" when rlock stopped the command for a --preempt request: see the reply;
-- "attempt": a Redlock attempt that got no quorum gives this node's grant back, which
-- was no run: its acquired record is deleted, no end is recorded)
-- Reply: 0 not ours, 1 released, 2 kept (--min-hold), 3 released and handed to the
-- --preempt request that stopped the command (lost "preempted", and its mark still
-- lives: the request is alive; rlock exits 81 once it took it, and the run ends preempted
-- then, by the request's grant; untaken, released: ARGV[10] "untaken"). Told preempted
-- but the mark gone (the request gave up or died before this release): 1, the run ends
-- released with the command's status. The mark there but not told preempted (the
-- command ended on its own first): the lock is handed over all the same, 1, released.
-- A hand-over overrides --min-hold's keep: the request takes the lock now. 4: a release
-- sent again (its first reply lost) whose first call kept the lock for --min-hold (2),
-- once the keep has ended (-v says so, neither "keeps it" nor "handed on").
-- (publish: PUBLISH, or SPUBLISH in a Redis >= 7 cluster)
-- done_ms > 0 (--once-per, the command succeeded): mark the name done for done_ms,
-- PREFIX{NAME}:done = the holder's fence, in this same step, only while the lock is ours,
-- and never by a release told "lost" (its rlock exits 79: not a success, e.g. a keeper
-- that gave its lease up by its own clock, then its --release --once-per).
-- The queue, the waiters, the mark, --preempt's request, the lock-delay and the history
-- (KEYS[1]..':queue', ':waiters', ':done', ':preempt', ':delay', ':history', same hash
-- tag) are not declared (a slot being migrated answers a script whose declared keys are
-- not all present with TRYAGAIN, and most of them usually do not exist): the keys this
-- step writes are touched first (here.lua), before any write, so that a node that
-- refuses one refuses the whole release; the queue's head, the waiters and --preempt's
-- request are only read (redis.pcall: not on this node, nothing to wake or record).
--@wake_one
--@history
--@delay
--@here
-- The lock not ours (keep_ms -1: the holder's lease is over by its own clock, it
-- releases nothing): the run is lost, recorded when it is still open (history.lua),
-- with hist and hret (ARGV[8], ARGV[9]: the owner's record may be gone) and who holds
-- the lock now, if anyone does.
-- Not ours and free, its owner's record gone with it (keep_ms >= 0: sent within the
-- lease by rlock's clock): the lease ran out on the server while the release was on its
-- way (a server stopped or slow); the command ended inside its lease by rlock's clock,
-- so the run ends expired (with the command's status), not lost. The lock gone but
-- its owner's record left (deleted, evicted), or taken by another: lost.
-- So too (lost: "expired", keep_ms -1) a release that rlock could not send before its
-- lease ended by its own clock, the command having ended inside it.
-- A release sent again (its first reply was lost, the connection with it) answers as
-- its first call did (history.lua's released_before): kept for --min-hold (the owner's
-- kept), or released or handed over (its end record, released or preempted; with the
-- history off, PREFIX{NAME}:rel:<token> holds the answer).
-- "untaken" (ARGV[10]): sent by a preempted holder's rlock once it saw the reservation
-- its release made end untaken (the request gave up or died): its run, left open by that
-- release, ends released with the command's status, if nobody ended it meanwhile.
if ARGV[10] == 'untaken' then
  local r = history_close(KEYS[1], ARGV[1])
  if r then history_end(KEYS[1], r, 'released', 'status', ARGV[7] or '') end
  return 1
end
local held = redis.call('GET', KEYS[1])
-- The holder's record, read once while the lock is ours (kept: a release sent again).
local run = ARGV[2] ~= '-1' and held == ARGV[1] and
            redis.call('HMGET', KEYS[2], 'hist', 'hret', 'fence', 'preemptible', 'host', 'pid',
                       'label', 'delay', 'kept')
if run and run[9] == '1' then
  stamp_again(KEYS[2], KEYS[1])
  return 2
end
local before = ARGV[2] ~= '-1' and held ~= ARGV[1] and released_before(KEYS[1], ARGV[1])
if before then
  stamp_again(KEYS[1] .. ':rel:' .. ARGV[1], KEYS[1] .. ':history', KEYS[1] .. ':done')
  return before == 2 and 4 or before -- 2: kept, and the keep is over (the lock not ours)
end
-- A --preempt request's mark or reservation that names this token, on a node where it
-- holds nothing (Redlock: it took its quorum on the other nodes, and this node's holder
-- released after its last attempt here, handing this node to it): the run it was for is
-- over, and so is the reservation, which would keep this node from the next holder for
-- its lease. The preempted holder's run, left open by the hand-over, ends preempted by
-- this request (status: its command's), as the request's grant ended it on the other
-- nodes. Not for an attempt's give-back: that request tries again. The word that a
-- request took a hand-over (taken) stays, as acquire.lua leaves it.
if held ~= ARGV[1] and ARGV[10] ~= 'attempt' then
  local pk = KEYS[1] .. ':preempt'
  local pre = redis.pcall('HMGET', pk, 'token', 'handover', 'from', 'fstatus', 'host', 'pid',
                          'label')
  if type(pre) == 'table' and not pre.err and pre[1] == ARGV[1] then
    local r = pre[2] == '1' and pre[3] and history_close(KEYS[1], pre[3])
    if r then
      history_end(KEYS[1], r, 'preempted', 'status', pre[4] or '', 'by_host', pre[5] or '',
                  'by_pid', pre[6] or '', 'by_label', pre[7] or '')
    end
    local call = redis.pcall
    --@preempt_drop
  end
end
-- Its --lock-delay entry goes all the same when rlock saw no loss (ARGV[10] neither
-- "lost" nor "seen") and sent the release within the lease by its own clock: the lease
-- ended with this release. A Redlock node that lagged (stopped, cut off) while the other
-- nodes renewed the lease and took the release has the lock expired by the time it reads
-- it; its entry would keep that node closed for the whole delay after a release, the
-- next holder degraded and, with one more node away, the name closed. (A break or a
-- lost lease: rlock saw the loss, the entry stays; a break it has not seen yet, the
-- :broken record names it, delay.lua.)
if held ~= ARGV[1] and ARGV[2] ~= '-1' and ARGV[10] ~= 'lost' and ARGV[10] ~= 'seen' then
  delay_released(KEYS[1], ARGV[1])
end
if held ~= ARGV[1] or ARGV[2] == '-1' then
  local r = (tonumber(ARGV[8] or '0') or 0) > 0 and history_close(KEYS[1], ARGV[1])
  if ARGV[10] == 'attempt' then
    -- a grant given back unused after its lease ran out here (its reply came later
    -- than the lease): no run, no end, as below; nor the end that the next acquisition
    -- wrote, finding its run open (history.lua)
    if (tonumber(ARGV[8] or '0') or 0) > 0 then history_unacquired(KEYS[1], ARGV[1]) end
  elseif r then
    local by = {}
    if held and held ~= ARGV[1] then by = redis.call('HMGET', KEYS[2], 'host', 'pid', 'label') end
    r.len, r.ret = ARGV[8], ARGV[9]
    local late = ARGV[10] == 'expired' or ARGV[10] ~= 'lost' and ARGV[10] ~= 'preempted' and
                 ARGV[2] ~= '-1' and not held and redis.call('EXISTS', KEYS[2]) == 0
    -- gone as an expiry leaves it, but sooner than the lease could end (ARGV[11]): lost
    if late and ARGV[10] ~= 'expired' and history_taken(KEYS[1], ARGV[1], ARGV[11]) then
      late = false
    end
    history_end(KEYS[1], r, late and 'expired' or 'lost', 'status', ARGV[7] or '', 'by_host', by[1] or '', 'by_pid',
                by[2] or '', 'by_label', by[3] or '')
  end
  return 0
end
-- The history (history.lua): how the run ended, ARGV[7] the command's status (or
-- ''); left open when rlock stopped the command for a --preempt request whose mark
-- still lives (the lock is handed to it, reply 3: see below), else released. The open run
-- (PREFIX{NAME}:history:run) is ours while the lock is, when the history is on: it ends,
-- unless its end is recorded already (a keeper that gave its lease up as lost by its own
-- clock recorded it, keep_ms -1, and left the lock to its job: its --release frees it).
-- released (--min-hold's keep too): no lock-delay (an entry only when the holder's record
-- asks for one, or is gone)
local hist = (tonumber(run[1] or '0') or 0) > 0
local orun = hist and run_of(redis.pcall('GET', KEYS[1] .. ':history:run'))
local open = orun and orun.token == ARGV[1]
local by = run[4] == '1' and
           redis.pcall('HMGET', KEYS[1] .. ':preempt', 'host', 'pid', 'label', 'token')
-- The request whose mark lives gets the lock (below); preempted: it stopped the command.
local to = by and by[4]
local preempted = to and ARGV[10] == 'preempted'
-- The mark (released_mark) when no end record is written, or when a short history may
-- have trimmed it before a release sent again looks (history_keeps), or when the end
-- record is lost (told "lost"): released_before reads released and preempted only (a
-- lost end is also written by a release that found the lock not its own, answer 0).
local keeps = open and ARGV[10] ~= 'lost' and history_keeps(run[1])
local done = tonumber(ARGV[6] or '0') > 0 and ARGV[10] ~= 'lost'
-- A keep (--min-hold) always writes the mark: its end record says released, as a
-- hand-on's does (reply 1), and a release sent again once the keep ended must tell them
-- apart (4).
local kept = tonumber(ARGV[2]) > 0 and not to
here((run[8] or not run[3]) and KEYS[1] .. ':delay', done and KEYS[1] .. ':done',
     hist and KEYS[1] .. ':history', hist and KEYS[1] .. ':history:run',
     (preempted or kept or not keeps) and KEYS[1] .. ':rel:' .. ARGV[1])
if run[8] or not run[3] then delay_open(KEYS[1], ARGV[1]) end
-- Preempted: the run stays open, its end not known yet. The request's grant records it
-- preempted (acquire.lua, from the reservation's from and fstatus); a reservation that
-- ends untaken, the holder's rlock records it released (ARGV[10] "untaken", above), or
-- --break does (break.lua); else the next acquire finds it expired.
if open and not preempted then redis.pcall('DEL', KEYS[1] .. ':history:run') end
-- Left open: with the command's status, for the acquire that finds it so once the
-- reservation ended untaken (history.lua's handed: released, not expired).
if open and preempted then
  history_set(KEYS[1] .. ':history:run', run_pack(orun.fence, orun.token, orun.host, orun.pid,
              orun.user, orun.label, orun.len, orun.ret, 's' .. (ARGV[7] or '')), orun.ret)
end
local recorded
if open and ARGV[10] == 'attempt' then
  -- A grant given back unused (a Redlock attempt without a quorum, quorum.c; a reply
  -- too late, wait.c): no run. Its acquired record goes too, no end.
  history_unacquired(KEYS[1], ARGV[1])
elseif open and not preempted then
  recorded = history_add(KEYS[1], run[1], run[2], 'ev',
              ARGV[10] == 'lost' and 'lost' or 'released', 'fence', run[3] or '', 'token',
              ARGV[1], 'host', run[5] or '', 'pid', run[6] or '', 'label', run[7] or '',
              'status', ARGV[7] or '')
end
if done then
  redis.call('SET', KEYS[1] .. ':done', run[3] or '0', 'PX', ARGV[6])
end
-- A --preempt request whose mark lives (to) gets the lock now, whether or not it stopped
-- the command: a hand-over does not wait for --min-hold's keep.
if kept then
  -- Marked, so that --status says the command has exited (not a stuck lock to break).
  redis.call('HSET', KEYS[2], 'kept', '1')
  -- A release sent again once the keep has ended (its first reply lost) finds the
  -- answer here, the end record notwithstanding (released: a hand-on's too).
  released_mark(KEYS[1], ARGV[1], false, redis.call('PTTL', KEYS[1]), 2)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 2
end
local answer = preempted and 3 or 1
if not (recorded and keeps) then
  released_mark(KEYS[1], ARGV[1], false, redis.call('PTTL', KEYS[1]), answer)
end
redis.call('DEL', KEYS[1], KEYS[2])
local head = redis.pcall('ZRANGE', KEYS[1] .. ':queue', 0, 0)[1]
-- The message: the released token, or "attempt" for a Redlock attempt's give-back (no
-- run ended: a waiter pausing after its own split vote keeps pausing, quorum.c).
local msg = ARGV[10] == 'attempt' and 'attempt' or ARGV[1]
if to then
  -- The lock goes to the request that asked, while it lives (its mark's short lease,
  -- renewed by its attempts: acquire.lua), before any other waiter of any mode, woken
  -- on its own list and channel; nobody else is woken (its release wakes them).
  local pk, wk = KEYS[1] .. ':preempt', ARGV[5] .. to
  redis.call('HSET', pk, 'handover', '1', 'from', ARGV[1], 'fstatus', ARGV[7] or '', 'hist',
             run[1] or '0', 'hret', run[2] or '0')
  -- an earlier hand-over's (acquire.lua): not this one's
  redis.pcall('HDEL', pk, 'taken', 'thost', 'tpid', 'tlabel')
  redis.pcall('ZREM', KEYS[1] .. ':waiters', to) -- not here: no place to drop (here.lua)
  redis.pcall('RPUSH', wk, 'preempted')
  redis.pcall('PEXPIRE', wk, math.max(redis.call('PTTL', pk), 1))
  redis.pcall(ARGV[4], wk, 'preempted')
elseif head then
  redis.pcall(ARGV[4], ARGV[5] .. head, msg)
else
  wake_one(KEYS[1], ARGV[5], nil, 'release')
  redis.pcall(ARGV[4], ARGV[3], msg)
end
return answer
