# Sourced by the guest's /init (guest-init.sh). The kernel's lease: its lapse, bursts on the interrupt CPU, the trace
# events, strict-then-loose limits, renewals, KUnit, the tick.

# A CPU's live lease from the test driver: "limit_us=N left_ms=M"
lease_of() { # cpu
	sed -n "s/^cpu$1 //p" $TEST/lease
}

# the block layer's renewals (patch 0003), of one CPU or of all
renewals_of() { # [cpu]
	awk -v c="cpu${1:-}" '$1 == c || c == "cpu" { s += $2 } END { print s + 0 }' \
		$TEST/renewals
}

# Time from the end of the last request to each CPU's first deep entry,
# for both shapes of an interrupt on another CPU than the submitter (CPU1):
# "ipi", the completion on CPU0 sent back to CPU1 by IPI (rq_affinity 2),
# and "remote", the request ended on CPU0 (rq_affinity 0). Everything else
# runs on CPU1, so CPU0 takes the completions while its tick is stopped
# and has nothing else to wake it. With the knob on, CPU0 stays out of the
# deep state during the I/O once its first completion renewed its lease
# (counted from 50 ms in: a few entries, against hundreds with the knob
# off), no CPU enters it before the timeout, and every CPU that served
# I/O sleeps deep again soon after: the lease ends within the timeout
# rounded up to whole ticks plus one tick, when the CPU wakes up for it
# (12 ms for 3 ms at HZ=250); the check allows menu one more tick to
# choose the deep state, and teo, which goes by its recent history of
# wake-ups, four more: in the functional guest, after the NVMe checks,
# teo kept a CPU whose lease had lapsed (woken by the lapse, late=0) out
# of it for 20.2 ms once, where the determinism boots saw 6.5-7.1 ms and
# its first deep entry without any lease ranges from 11 us to 5.8 ms.
check_lapse() { # governor shape
	g=$1 shape=$2
	taskset -p -c 1 $$ >/dev/null
	echo "$g" >$CPUIDLE/current_governor
	mknull lx queue_mode=2 irqmode=2 completion_nsec=$SLOW_NS \
		submit_queues=2 complete_cpu=0 || fail setup-lx
	[ "$shape" = ipi ] && aff=2 || aff=0
	echo $aff >/sys/block/lx/queue/rq_affinity
	echo 3 >"$(knob lx timeout_ms)"
	bound=$(((3000 + TICK_US - 1) / TICK_US * TICK_US + 3 * TICK_US))
	[ "$g" != teo ] || bound=$((bound + 4 * TICK_US))
	for lim in -1 10; do
		echo $lim >"$(knob lx limit_us)"
		# deep entries while fio does I/O, counted from 50 ms into
		# the run: CPU0 is the queue's interrupt CPU from its first
		# completion on, and how often it idles before that depends
		# on how long fio takes to start; a second run for the
		# lapse, as fio's postrun keeps CPU1 busy after the last I/O
		t0=$(cat $TEST/leased_late_wake)
		rm -f /tmp/pre0 /tmp/pre1
		fio_qd1 lx 300 --exec_prerun="sh -c '(sleep 0.05; idle-snap 0 >/tmp/pre0; idle-snap 1 >/tmp/pre1) </dev/null >/dev/null 2>&1 &'" \
			--exec_postrun="sh -c 'idle-snap 0 >/tmp/post0; idle-snap 1 >/tmp/post1'" >/dev/null
		deep0=$(delta "$(cat /tmp/pre0)" "$(cat /tmp/post0)" 3)
		deep1=$(delta "$(cat /tmp/pre1)" "$(cat /tmp/post1)" 3)
		sleep 0.1
		fio_qd1 lx 32 >/dev/null
		sleep 0.5
		late=$(($(cat $TEST/leased_late_wake) - t0))
		first=$(cat $TEST/first_deep | tr '\n' ' ')
		measure "lapse gov=$g shape=$shape limit=$lim deep_during_io=$deep0,$deep1 leased_late_wake=$late $first"
		[ $lim = -1 ] && continue
		# a CPU held shallow must wake up by the lapse, not at its
		# next timer, possibly seconds later
		expect "lapse-$g-$shape-wakes-by-the-lapse late=$late" "$late" = 0
		expect "lapse-$g-$shape-no-deep-during-io cpu0=$deep0 cpu1=$deep1" \
			"$deep0" -le 4 -a "$deep1" -le 2
		# from the last I/O's end: CPU0 renews there (it ends the
		# request or hands it back); CPU1, the submitter, renewed at
		# its dispatch, 1 ms (SLOW_NS) earlier
		for cpu in 0 1; do
			us=$(echo "$first" | sed -n "s/.*cpu$cpu \(-*[0-9]*\).*/\1/p")
			low=$((3000 - cpu * SLOW_NS / 1000))
			expect "lapse-$g-$shape-cpu$cpu-deep-after-${low}us-within-${bound}us ${us}us" \
				"$us" -ge $low -a "$us" -le $bound
		done
	done
	echo -1 >"$(knob lx limit_us)"
	rmnull lx
	taskset -p -c 0-1 $$ >/dev/null
}

lapse_checks() {
	for g in menu teo; do
		check_lapse $g remote
		check_lapse $g ipi
	done
}

# The interrupt CPU from the first I/O of a burst (patch 0003). CPU1
# submits and holds the device's timer (complete_cpu=1), which raises each
# completion on CPU0 by IPI (irq_cpu=0), and CPU0 sends it back to CPU1
# (rq_affinity=2): CPU0 takes the interrupts, submits nothing and has no
# timer of the device's. Bursts of 8 reads 20 ms apart, longer than the
# lease (3 ms, lapsed and seen within 12 ms at HZ=250): CPU0 sleeps deep
# between them and, with nothing else to wake it, the first completion of
# a burst finds it there and pays the exit (paid before the handler, as on
# hardware: the test driver). With the knob on, the first dispatch of a
# burst hands CPU0 the queue's lease and wakes it, so its exit runs while
# the device works (200 us, longer than the 150 us exit): the first read
# of a burst then takes no longer than with the deep state off, plus
# 10 us (median; the 90th percentile within 30 us: a CPU held by a lease
# keeps its tick, whose handler a completion may have to wait for, 18 us
# seen in a lock-debugging 6.12 guest), and CPU0 still sleeps deep in
# the gaps. The lease reaches CPU0 by
# a function-call IPI once a burst, none while CPU0's own lease holds:
# about 20 more than knob off (the first burst teaches which CPU takes the
# interrupts; 15 to 26 seen, other IPIs vary), not one per read (160).
# The three configurations take turns, five bursts each, four rounds:
# what else the host runs (the other tree's guest beside this one, under
# TCG) then weighs on all three alike; run one after the other, a 20 us
# slower stretch of host time once fell on the knob's run alone.
BURST_ARGS="8 20000 5 raw"
BURST_ROUNDS=4
cal0() { awk '$1 == "CAL:" { print $2 }' /proc/interrupts; }
# "first_p50= first_p90= first_max= rest_p50= rest_p90= rest_max=" of the
# pooled raw times in a file, nearest rank as idle-watch
burst_summary() { # file
	for k in first rest; do
		sed -n "s/^$k //p" "$1" | sort -n | awk -v k=$k '
			{ v[NR] = $1 }
			END {
				printf "%s_p50=%d %s_p90=%d %s_max=%d ", k,
					v[int((NR * 50 + 99) / 100)], k,
					v[int((NR * 90 + 99) / 100)], k, v[NR]
			}'
	done
	echo
}
burst_cfg() { # off | floor | knob
	for c in 0 1; do
		echo $([ $1 = floor ] && echo 1 || echo 0) \
			>/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable
	done
	echo $([ $1 = knob ] && echo 10 || echo -1) >"$(knob ib limit_us)"
}
# "threaded": CPU0's handler runs in a kernel thread bound to CPU0 that
# the IPI wakes (irq_threaded=1), as with forced or PREEMPT_RT threading
# or nvme's use_threaded_interrupts: the completion then comes from task
# context, and CPU0 must still be learned as the interrupt CPU.
check_irq_cpu_burst() { # governor [threaded]
	g=$1
	th=
	[ "${2:-}" != threaded ] || { th=irq_threaded=1; g=$g-threaded; }
	echo "$1" >$CPUIDLE/current_governor
	mknull ib queue_mode=2 irqmode=2 completion_nsec=200000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 $th || fail setup-ib
	echo 2 >/sys/block/ib/queue/rq_affinity
	echo 3 >"$(knob ib timeout_ms)"
	for cfg in off floor knob; do
		rm -f /tmp/burst-$cfg /tmp/burst-use-$cfg
	done
	for round in $(seq $BURST_ROUNDS); do
		for cfg in off floor knob; do
			burst_cfg $cfg
			pre=$(idle-snap 0)
			pre1=$(idle-snap 1)
			c0=$(cal0)
			idle-watch burst /dev/ib 1 $BURST_ARGS >>/tmp/burst-$cfg
			c1=$(cal0)
			post=$(idle-snap 0)
			post1=$(idle-snap 1)
			# per run: call IPIs and deep entries on CPU0; poll and
			# C1 entries on CPU0; poll, C1 and deep entries on CPU1
			# and deep time and idle time (us) on CPU0 and CPU1
			echo $((c1 - c0)) $(delta "$pre" "$post" 3) \
				$(delta "$pre" "$post" 1) $(delta "$pre" "$post" 2) \
				$(delta "$pre1" "$post1" 1) $(delta "$pre1" "$post1" 2) \
				$(delta "$pre1" "$post1" 3) \
				$(delta "$pre" "$post" 6) \
				$(($(delta "$pre" "$post" 4) + $(delta "$pre" "$post" 5) + $(delta "$pre" "$post" 6))) \
				$(delta "$pre1" "$post1" 6) \
				$(($(delta "$pre1" "$post1" 4) + $(delta "$pre1" "$post1" 5) + $(delta "$pre1" "$post1" 6))) \
				>>/tmp/burst-use-$cfg
		done
	done
	burst_cfg off
	for cfg in off floor knob; do
		r=$(burst_summary /tmp/burst-$cfg)
		set -- $(awk '{ for (i = 1; i <= NF; i++) s[i] += $i }
			END { for (i = 1; i <= 11; i++) printf "%d ", s[i] }' /tmp/burst-use-$cfg)
		measure "burst gov=$g cfg=$cfg cpu0_deep=$2 cpu0_call_ipis=$1 cpu0_poll_c1=$3 $4 cpu1_poll_c1_deep=$5 $6 $7 cpu0_deep_pct=$(($8 * 100 / ($9 + 1))) cpu1_deep_pct=$((${10} * 100 / (${11} + 1))) $r"
		eval "cal_$cfg=$1 deep_$cfg=$2"
		eval "p90_$cfg=$(echo "$r" | sed -n 's/.*first_p90=\([0-9]*\).*/\1/p')"
		eval "p50_$cfg=$(echo "$r" | sed -n 's/.*first_p50=\([0-9]*\).*/\1/p')"
	done
	# knob off, the first read of a burst pays CPU0's exit: else the
	# model hides what the check is about
	expect "irq-cpu-burst-$g-off-pays-exit first_p90=${p90_off}us floor=${p90_floor}us" \
		"${p90_off:-0}" -ge $((${p90_floor:-0} + 100))
	expect "irq-cpu-covered-first-of-burst-$g first_p50=${p50_knob}us floor=${p50_floor}us" \
		"${p50_knob:-999999}" -le $((${p50_floor:-0} + 10))
	# A burst that finds CPU0 already deep still pays what is left of
	# its exit once the lease's IPI wakes it at the first submission:
	# the exit less the 200 us completion time (seen up to floor+170 us).
	# How many bursts find it so moves with the guests beside it (fewer
	# than one in ten in most runs, more in some: first_p90 floor+40 us),
	# so the p90 is bounded by what the lease must save there:
	# at least half the completion time off the exit the first read
	# pays without the lease. Not waking CPU0 in 10 % of the bursts or
	# more puts the p90 at the uncovered exit and fails this.
	expect "irq-cpu-covered-first-of-burst-p90-$g first_p90=${p90_knob}us off_first_p50=${p50_off}us" \
		"${p90_knob:-999999}" -le $((${p50_off:-0} - 100))
	expect "irq-cpu-burst-$g-deep-between-bursts cpu0_deep=$deep_knob" \
		"${deep_knob:-0}" -ge 10
	# The lease's IPIs come at a burst's first dispatch, not per I/O
	# (8 a burst: 640 here). Their presence is the p50 check above: the
	# call IPIs of two configurations differ by up to 10 without them
	# (off 175-182, floor 176-183 in CI's guests), so a lower bound on
	# the difference (10) failed on noise (9, 6.12, menu)
	extra=$((cal_knob - cal_off))
	expect "irq-cpu-lease-ipis-at-most-once-a-burst-$g extra=$extra" \
		"$extra" -le 40
	rmnull ib
	echo menu >$CPUIDLE/current_governor
}

# The submitter when kblockd dispatches (patch 0003). With an I/O
# scheduler a read submitted outside a plug (an O_DIRECT pread) is
# inserted and dispatched by kblockd, on a CPU of the hardware queue's
# mask that blk-mq rotates every 8 runs where the queue set has more than
# one hardware queue (here one default queue for both CPUs and null_blk's
# poll queue): about half the bursts are dispatched on CPU0. CPU1 submits
# and takes the completions back (rq_affinity=2) from CPU0, which holds
# the device's timer (complete_cpu=0) and stays out of its deep state in
# every configuration (its exit is the other burst check's): what is
# measured is CPU1's. Without the lease CPU1 sleeps deep while the first
# read of a burst is in flight (its history is the gap) and pays the exit
# on the completion's IPI. With the knob on it must be held from its own
# submission, not only by the dispatches that run on it: the first read
# of a burst, and the others, within 75 us (half the exit) of the deep
# state off at the 90th percentile, 20 bursts. When only dispatch
# renewed, every read of a burst dispatched on CPU0 (one in two) paid the
# exit: first and rest p90 459 and 450 us against 316 and 305 with the
# deep state off (7.3); with the submission's renewal 321 and 309 against
# 308 and 306. The dispatches are traced in every configuration alike.
check_kblockd_burst() {
	# 6.12 plugs every submission (__submit_bio()), and the plug's flush
	# dispatches on the submitting CPU: kblockd dispatches a read there
	# only when the flush comes from schedule() or the queue is busy, not
	# in this shape. Its elevator switch under the freeze also draws a
	# lockdep report (7.3 has neither)
	case $(uname -r) in
	6.12.*)
		measure "kblockd-burst not-run: 6.12 dispatches a plugged read on its submitter"
		return ;;
	esac
	echo menu >$CPUIDLE/current_governor
	mknull kb queue_mode=2 irqmode=2 completion_nsec=200000 submit_queues=1 \
		poll_queues=1 complete_cpu=0 || fail setup-kb
	echo mq-deadline >/sys/block/kb/queue/scheduler
	echo 2 >/sys/block/kb/queue/rq_affinity
	echo 3 >"$(knob kb timeout_ms)"
	echo 1 >/sys/devices/system/cpu/cpu0/cpuidle/state2/disable
	tr=/sys/kernel/tracing
	[ -d $tr/events ] || mount -t tracefs tracefs $tr
	rm -f /tmp/kb-off /tmp/kb-floor /tmp/kb-knob /tmp/kb-issue
	echo 1 >$tr/events/block/block_rq_issue/enable
	for round in $(seq $BURST_ROUNDS); do
		for cfg in off floor knob; do
			echo $([ $cfg = floor ] && echo 1 || echo 0) \
				>/sys/devices/system/cpu/cpu1/cpuidle/state2/disable
			echo $([ $cfg = knob ] && echo 10 || echo -1) >"$(knob kb limit_us)"
			echo >$tr/trace
			idle-watch burst /dev/kb 1 $BURST_ARGS >>/tmp/kb-$cfg
			[ $cfg != knob ] || cat $tr/trace >>/tmp/kb-issue
		done
	done
	for cfg in off floor knob; do
		r=$(burst_summary /tmp/kb-$cfg)
		measure "kblockd-burst cfg=$cfg $r"
		eval "p90_$cfg=$(echo "$r" | sed -n 's/.*first_p90=\([0-9]*\).*/\1/p')"
		eval "rest90_$cfg=$(echo "$r" | sed -n 's/.*rest_p90=\([0-9]*\).*/\1/p')"
	done
	echo 0 >$tr/events/block/block_rq_issue/enable
	# the shape: kblockd dispatched on both CPUs (the trace's CPU field)
	dev=$(tr : , </sys/block/kb/dev)
	on0=$(grep -c "kworker.*\\[000\\].*block_rq_issue: $dev " /tmp/kb-issue)
	on1=$(grep -c "kworker.*\\[001\\].*block_rq_issue: $dev " /tmp/kb-issue)
	expect "kblockd-burst-dispatches-on-both-cpus cpu0=$on0 cpu1=$on1 $(cat /sys/block/kb/queue/scheduler)" \
		"$on0" -ge 40 -a "$on1" -ge 40 ||
		grep block_rq_issue /tmp/kb-issue | head -4 | sed 's/^/kblockd-burst issue: /'
	expect "kblockd-burst-off-pays-exit first_p90=${p90_off}us floor=${p90_floor}us" \
		"${p90_off:-0}" -ge $((${p90_floor:-0} + 100))
	expect "kblockd-burst-submitter-covered first_p90=${p90_knob}us floor=${p90_floor}us" \
		"${p90_knob:-999999}" -le $((${p90_floor:-0} + 75))
	# and through the burst: a burst dispatched on CPU0 leaves CPU1
	# unheld for all its reads when only dispatch renews
	expect "kblockd-burst-submitter-covered-rest rest_p90=${rest90_knob}us floor=${rest90_floor}us" \
		"${rest90_knob:-999999}" -le $((${rest90_floor:-0} + 75))
	echo -1 >"$(knob kb limit_us)"
	for c in 0 1; do
		echo 0 >/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable
	done
	rm -f /tmp/kb-issue
	rmnull kb
}

burst_checks() {
	check_irq_cpu_burst menu
	check_irq_cpu_burst teo
	check_irq_cpu_burst menu threaded
	check_kblockd_burst
}

# The lease as an operator sees it (patch 0005): the cpuidle attribute
# shows the limit in force and the time left while I/O renews it, "-1 0"
# once it lapsed; the power trace events give one start and one lapse per
# CPU that served a burst of I/O (CPU1 submits, CPU0 takes the completion
# interrupts), none per renewal, and no change while the limit stays.
check_lease_trace() {
	tr=/sys/kernel/tracing
	ev=$tr/events/power
	[ -d $tr/events ] || mount -t tracefs tracefs $tr
	if [ ! -d $ev/cpu_latency_lease_start ]; then
		fail lease-trace-events-present "(no $ev/cpu_latency_lease_start)"
		return
	fi
	taskset -p -c 1 $$ >/dev/null
	echo menu >$CPUIDLE/current_governor
	mknull lt queue_mode=2 irqmode=2 completion_nsec=50000 submit_queues=2 \
		complete_cpu=0 || fail setup-lt
	echo 2 >/sys/block/lt/queue/rq_affinity
	echo 10 >"$(knob lt limit_us)"
	# Under -icount the vCPUs run in turn: while one runs, the other
	# stands still in guest time, so a 3 ms lease could lapse between two
	# of its I/Os, as a real CPU's cannot. 200 ms outlasts any such gap:
	# the lease holds from the first I/O to 200 ms after the last.
	echo 200 >"$(knob lt timeout_ms)"
	max_left=$(((200000 + TICK_US - 1) / TICK_US * TICK_US + TICK_US))
	for cpu in 0 1; do
		a=$(sysfs_lease $cpu)
		expect "lease-attr-idle-cpu$cpu $a" "$a" = "-1 0"
		# through the idle path once: what it last found is no lease
		taskset -c $cpu true
	done
	echo >$tr/trace
	for e in start change lapse; do
		echo 1 >$ev/cpu_latency_lease_$e/enable
	done
	r0=$(renewals_of)
	fio --name=lt --filename=/dev/lt --rw=randread --bs=4k --ioengine=psync \
		--direct=1 --cpus_allowed=1 --time_based --runtime=2 --size=64m \
		--output-format=terse >/dev/null 2>&1 &
	taskset -p -c 0 $$ >/dev/null
	# until fio does I/O (it starts later on 7.3 than on 6.12), at most 10 s
	i=0
	while [ "$(awk '{ print $1 }' /sys/block/lt/stat)" -lt 100 ] && [ $i -lt 1000 ]; do
		sleep 0.01
		i=$((i + 1))
	done
	# every read of each CPU shows the 10 us lease, with time left
	# within one timeout rounded up to ticks plus one
	for cpu in 0 1; do
		held=0 bad= i=0
		while [ $i -lt 20 ]; do
			set -- $(sysfs_lease $cpu)
			if [ "$1" = 10 ] && [ "$2" -gt 0 ] && [ "$2" -le $max_left ]; then
				held=$((held + 1))
			else
				bad="$bad [$*]"
			fi
			i=$((i + 1))
		done
		expect "lease-attr-during-io-cpu$cpu held=$held/20$bad" "$held" = 20
	done
	# what blkqos metrics makes of the real sysfs with leases live (the
	# harness runs promtool on the BLKQOS-PROM lines): both leases held
	blkqos metrics >/tmp/metrics.prom 2>/tmp/metrics.err
	rc=$?
	held=$(grep -c '^blkqos_cpu_lease_held{cpu="[01]"} 1$' /tmp/metrics.prom)
	expect "metrics-exit-0 $rc" $rc = 0
	sed 's/^/BLKQOS-PROM /' /tmp/metrics.prom
	expect "metrics-shows-both-leases held=$held" "$held" = 2
	wait
	# the 200 ms lease, rounded up, and the tick that sees it lapse
	sleep 0.3
	renewals=$(($(renewals_of) - r0))
	for e in start change lapse; do
		echo 0 >$ev/cpu_latency_lease_$e/enable
	done
	grep -o 'cpu_latency_lease_[a-z]*: cpu_id=[0-9]* limit_us=-*[0-9]*' $tr/trace |
		sed 's/cpu_latency_lease_//; s/: cpu_id=/ /; s/ limit_us=/ /' >/tmp/lease-events
	# a lapse carries the limit that lapsed, no time left (always 0)
	n=$(grep -c 'cpu_latency_lease_lapse: .*left_us' $tr/trace || true)
	expect "lease-trace-lapse-has-no-time-left $n" "$n" = 0
	for cpu in 0 1; do
		set -- $(sysfs_lease $cpu)
		expect "lease-attr-after-lapse-cpu$cpu $*" "$1 $2" = "-1 0"
		starts=$(grep -c "^start $cpu 10\$" /tmp/lease-events)
		lapses=$(grep -c "^lapse $cpu 10\$" /tmp/lease-events)
		changes=$(grep -c "^change $cpu " /tmp/lease-events)
		# one of each for the burst, which the 200 ms lease spans
		expect "lease-trace-cpu$cpu-one-start-one-lapse start=$starts lapse=$lapses change=$changes" \
			"$starts" = 1 -a "$lapses" = 1 -a "$changes" = 0
	done
	[ "$ONLY" != lease ] || grep cpu_latency_lease $tr/trace
	events=$(wc -l </tmp/lease-events)
	measure "lease-trace renewals=$renewals events=$events"
	expect "lease-trace-not-per-renewal events=$events renewals=$renewals" \
		"$events" -le 8 -a "$renewals" -ge 100
	echo -1 >"$(knob lt limit_us)"
	rmnull lt
	taskset -p -c 0-1 $$ >/dev/null
}

# A strict queue (limit 0) and a loose one (limit 20) on the same CPU:
# once the strict one is idle, the CPU returns to C1 within its timeout
# although the loose one keeps renewing.
check_strict_then_loose() {
	echo menu >$CPUIDLE/current_governor
	mknull sa queue_mode=2 irqmode=2 completion_nsec=100000 submit_queues=2 ||
		fail setup-sa
	mknull sb queue_mode=2 irqmode=2 completion_nsec=$SLOW_NS submit_queues=2 ||
		fail setup-sb
	echo 0 >"$(knob sa limit_us)"
	echo 20 >"$(knob sb limit_us)"
	fio --name=loose --filename=/dev/sb --rw=randread --bs=4k --ioengine=psync \
		--direct=1 --cpus_allowed=1 --time_based --runtime=1 --size=64m \
		--output-format=terse >/dev/null 2>&1 &
	# the loose queue must be doing I/O before the strict one starts
	i=0
	while [ "$(awk '{ print $1 }' /sys/block/sb/stat)" -lt 10 ] && [ $i -lt 500 ]; do
		sleep 0.01
		i=$((i + 1))
	done
	fio_qd1 sa 16 >/dev/null
	overlap=$(awk '{ print $1 }' /sys/block/sb/stat)
	sleep 0.05	# the strict lease lapses within 3 ms + 2 ticks
	before=$(idle-snap 1)
	sleep 0.3
	after=$(idle-snap 1)
	running=$(awk '{ print $1 }' /sys/block/sb/stat)
	wait
	expect "strict-and-loose-overlap sb_reads=$overlap,$running" \
		"$overlap" -ge 10 -a "$running" -gt "$overlap"
	poll=$(delta "$before" "$after" 1)
	c1=$(delta "$before" "$after" 2)
	measure "strict-then-loose poll=$poll c1=$c1"
	expect "strict-limit-lapses-under-loose-io poll=$poll c1=$c1" \
		"$poll" -le 4 -a "$c1" -ge 100
	rmnull sa
	rmnull sb
}

# A CPU renews its lease for a queue at most once a tick, whatever the
# I/O rate (patch 0003): renewals that reach the lease (the test driver
# counts the hooks' out-of-line calls, per CPU), against the ticks of the
# run, on each CPU that serves the I/O: CPU1, the submitter, in every
# shape; CPU0 as well where it ends the request (remote) or hands it back
# by IPI (ipi), and never where the submitter ends it (local). 2000 reads
# take far more I/Os than ticks, so the bound tells once a tick from once
# an I/O.
check_renewals() {
	n=2000
	# name:irqmode:complete_cpu:rq_affinity; "local" goes through
	# blk_mq_complete_request() and ends on the submitting CPU
	for shape in local:1:-1:1 remote:2:0:0 ipi:2:0:2; do
		IFS=: read -r name irq ccpu aff <<-EOF
		$shape
		EOF
		mknull rn queue_mode=2 irqmode="$irq" completion_nsec=20000 \
			submit_queues=2 complete_cpu="$ccpu" || fail setup-rn
		echo "$aff" >/sys/block/rn/queue/rq_affinity
		echo 10 >"$(knob rn limit_us)"
		a0=$(renewals_of 0) a1=$(renewals_of 1)
		res=$(fio_qd1 rn $n)
		c0=$(($(renewals_of 0) - a0)) c1=$(($(renewals_of 1) - a1))
		ticks=$(echo "$res" | awk -v n=$n -v t=$TICK_US \
			'{ printf "%d", n / $1 * 1000000 / t + 1 }')
		measure "renewals shape=$name ios=$n cpu0=$c0 cpu1=$c1 ticks=$ticks"
		# about one a tick on each CPU that serves the I/O: at most
		# one a tick (plus three), at least one every other tick
		max=$((ticks + 3)) min=$((ticks / 2))
		# (local: CPU0 serves none of it; a udev probe of the new disk
		# may still read it there)
		[ $name = local ] && want0="$c0 -le 3" || want0="$c0 -ge $min -a $c0 -le $max"
		expect "renewals-$name-about-once-a-tick-per-cpu cpu0=$c0 cpu1=$c1 ticks=$ticks" \
			$want0 -a $c1 -ge $min -a $c1 -le $max -a $((2 * max)) -lt $((n / 2))
		rmnull rn
	done
}

# menu must not fight its own polling fix (RESIDENCY_THRESHOLD_NS, 15 us):
# under a short predicted idle it may leave POLL for C1 only when C1's
# target residency is below the threshold; a lease at 0 keeps POLL.
check_menu_poll_override() {
	echo menu >$CPUIDLE/current_governor
	mknull mo queue_mode=2 irqmode=2 completion_nsec=15000 submit_queues=2 ||
		fail setup-mo
	for res in 10 20; do
		echo $res >$TEST/c1_residency_us
		for lim in -1 0; do
			echo $lim >"$(knob mo limit_us)"
			fio_qd1 mo 256 --exec_prerun="sh -c 'idle-snap 1 >/tmp/pre'" \
				--exec_postrun="sh -c 'idle-snap 1 >/tmp/post'" >/dev/null
			poll=$(delta "$(cat /tmp/pre)" "$(cat /tmp/post)" 1)
			c1=$(delta "$(cat /tmp/pre)" "$(cat /tmp/post)" 2)
			deep=$(delta "$(cat /tmp/pre)" "$(cat /tmp/post)" 3)
			measure "menu-poll res=$res limit=$lim poll=$poll c1=$c1 deep=$deep"
			if [ $lim = 0 ]; then
				expect "menu-res$res-limit0-polls poll=$poll c1=$c1" $c1 -le 8
			elif [ $res = 10 ]; then
				expect "menu-res10-prefers-c1 poll=$poll c1=$c1" $c1 -gt $poll
			else
				# C1 not preferred to POLL: one 6.12 run went
				# without a single POLL or C1 entry (poll=0 c1=0)
				expect "menu-res20-keeps-polling poll=$poll c1=$c1 deep=$deep" \
					$c1 -le $((poll / 4))
			fi
		done
	done
	echo 4 >$TEST/c1_residency_us
	echo -1 >"$(knob mo limit_us)"
	rmnull mo
}

# The series' KUnit suites, built as modules (guest.config), on the
# real cpuidle and block paths of this kernel.
check_kunit_modules() {
	for ko in /lib/kunit/*.ko; do
		[ -e "$ko" ] || { fail kunit-modules-present; return; }
		insmod "$ko" || fail "insmod-$(basename "$ko")"
	done
	for suite in cpu_latency_lease blk_cpu_lat; do
		if dmesg | grep -q "not ok [0-9]* $suite\$"; then
			fail "kunit-module-$suite"
		elif dmesg | grep -q " ok [0-9]* $suite\$"; then
			pass "kunit-module-$suite $(dmesg | grep -o "# $suite: pass:[0-9]* fail:[0-9]*" | tail -1)"
		else
			fail "kunit-module-$suite (no result)"
		fi
	done
}

# The series' kselftest (patch 7) as a maintainer runs it on real
# hardware: KTAP out, every test passed and none skipped (the guest has
# root, fio, null_blk, tracefs and a cpuidle driver on every CPU).
check_kselftest() {
	k=/kselftest/cpu_latency_lease/cpu_latency_lease.sh
	[ -x $k ] || { fail "kselftest-present ($k)"; return; }
	# it skips its lease checks on a CPU another lease holds: let the
	# leases of the checks before it lapse (their timeouts are 200 ms)
	lease_wait_free 1 || fail "kselftest-cpu1-free ($(sysfs_lease 1))"
	# menu, as in the other checks (the tick check before it leaves teo)
	echo menu >$CPUIDLE/current_governor
	timeout 120 $k >/tmp/ksft.out 2>&1
	rc=$?
	sed 's/^/kselftest: /' /tmp/ksft.out
	ok=$(grep -c '^ok [0-9]* ' /tmp/ksft.out)
	skip=$(grep -c '# SKIP' /tmp/ksft.out)
	expect "kselftest-cpu-latency-lease rc=$rc ok=$ok skip=$skip" \
		"$rc" = 0 -a "$ok" = 7 -a "$skip" = 0
}

# What the lease adds to the tick on a nohz_full CPU (the guest boots with
# nohz_full=1): clock event programmings on CPU1, which runs fio alone, in
# the cross shape (the completion timer on CPU0, the completion sent back
# to CPU1 by IPI, so that CPU1 holds no timer of the device's), with the
# knob off and on. A lease moves the CPU's wake-up when its deadline
# moves, at most once a tick; a wake-up for the lapse set at each idle
# entry and taken back when fio runs would add up to two programmings per
# I/O (1.2 per read seen with the lapse left out of the busy path).
check_tick() {
	[ "$(cat /sys/devices/system/cpu/nohz_full)" = 1 ] ||
		fail "tick-nohz-full-cpu1 $(cat /sys/devices/system/cpu/nohz_full)"
	taskset -p -c 0 $$ >/dev/null
	mknull tk queue_mode=2 irqmode=2 completion_nsec=200000 \
		submit_queues=2 complete_cpu=0 || fail setup-tk
	echo 2 >/sys/block/tk/queue/rq_affinity
	echo 3 >"$(knob tk timeout_ms)"
	n=2000
	for g in menu teo; do
		echo "$g" >$CPUIDLE/current_governor
		for lim in -1 10; do
			echo $lim >"$(knob tk limit_us)"
			fio_qd1 tk 200 >/dev/null
			res=$(fio_qd1 tk $n \
				--exec_prerun="sh -c 'cat $TEST/reprograms >/tmp/r0'" \
				--exec_postrun="sh -c 'cat $TEST/reprograms >/tmp/r1'")
			r=$(($(sed -n 's/^cpu1 //p' /tmp/r1) - $(sed -n 's/^cpu1 //p' /tmp/r0)))
			# the run's length in ticks, from fio's IOPS
			ticks=$(echo "$res" | awk -v n=$n -v t=$TICK_US \
				'{ printf "%d", n / $1 * 1000000 / t + 1 }')
			measure "tick gov=$g limit=$lim ios=$n reprograms_cpu1=$r ticks=$ticks iops=${res%% *}"
			[ $lim = -1 ] && off=$r || on=$r
		done
		# about one programming a tick while fio runs, plus the one
		# that arms the first lapse and the one that lets the last go
		# (152 against 23 + 128 seen; 156 against 19 + 128 once, so
		# the bound is two a tick): one per I/O would be 2000 more
		expect "tick-$g-nohz-full-no-reprogramming-per-io off=$off on=$on ios=$n ticks=$ticks" \
			"$on" -le $((off + 2 * ticks))
	done
	echo -1 >"$(knob tk limit_us)"
	echo menu >$CPUIDLE/current_governor
	rmnull tk
	check_tick_busy
	taskset -p -c 0-1 $$ >/dev/null
}

# A busy nohz_full CPU: one task reading without a pause (irqmode=0: a
# read completes in its own submission), so CPU1 never idles, its tick
# stays stopped and every read renews the lease. The lapse matters only
# to an idle CPU, which looks at it on its way into idle: a busy CPU must
# not take a clock event per lease timeout (333 a second at 3 ms) to
# look at a lapse that never comes.
check_tick_busy() {
	mknull tb queue_mode=2 irqmode=0 submit_queues=2 || fail setup-tb
	echo 3 >"$(knob tb timeout_ms)"
	for lim in -1 10; do
		echo $lim >"$(knob tb limit_us)"
		cat $TEST/reprograms >/tmp/r0
		n0=$(renewals_of 1)
		l0=$(awk '$1 == "LOC:" { print $3 }' /proc/interrupts)
		# the lease CPU1 holds while fio reads, looked at from CPU0
		# every millisecond from before fio starts to 20 ms after it
		# ends: CPU0 may get no turn for a second while CPU1 reads
		# (knob on or off), and a shell loop there (fork, exec, a 10
		# ms sleep: each look several of CPU0's turns) landed no look
		# while the lease was live in about 1 run in 3
		idle-watch lease 0 1 30000 >/tmp/busy-lease &
		w=$!
		fio --name=busy --filename=/dev/tb --rw=randread --bs=4k \
			--ioengine=psync --direct=1 --size=64m --cpus_allowed=1 \
			--norandommap --time_based --runtime=2 \
			--output-format=terse --terse-version=3 >/tmp/fio.out 2>&1
		kill $w
		wait $w
		l1=$(awk '$1 == "LOC:" { print $3 }' /proc/interrupts)
		cat $TEST/reprograms >/tmp/r1
		r=$(($(sed -n 's/^cpu1 //p' /tmp/r1) - $(sed -n 's/^cpu1 //p' /tmp/r0)))
		ios=$(awk -F';' '$1 == 3 { print int($6 / 4) }' /tmp/fio.out)
		held=$(cat /tmp/busy-lease)
		renewed=$(($(renewals_of 1) - n0))
		measure "tick-busy limit=$lim fio_secs=2 reads=$ios reprograms_cpu1=$r local_timer_irqs_cpu1=$((l1 - l0)) renewals_cpu1=$renewed $held"
		if [ $lim = -1 ]; then
			off=$((l1 - l0)) held_off=$held
		else
			on=$((l1 - l0))
		fi
	done
	# the busy CPU's tick stopped (else there is nothing to see: 500
	# ticks in 2 s at HZ=250; 2 to 21 interrupts seen), and its lease
	# held while it read
	expect "tick-busy-tick-stopped off=$off" "$off" -le 50
	expect "tick-busy-lease-held ${held%% *}" "${held%% *}" = lease=10
	expect "tick-busy-no-lease-knob-off ${held_off%% *}" "${held_off%% *}" = lease=-1
	# fio's two seconds and its start and end: the residual nohz_full
	# tick (1 a second), with a margin; not one a lease timeout
	expect "tick-busy-nohz-full-no-timer-per-lease-timeout off=$off on=$on" \
		"$on" -le $((off + 20))
	echo -1 >"$(knob tb limit_us)"
	rmnull tb
}
