#!/bin/sh
# /init of the blkqos test guest (busybox). Prints one line per check:
#   BLKQOS-CHECK PASS|FAIL <name> [detail]
# and figures as BLKQOS-MEASURE <name> key=value..., then BLKQOS-DONE.
# Settings come from the kernel command line: blkqos.mode=psd (the
# patched kernel) or blkqos.mode=nopsd (CONFIG_CPU_LATENCY_LEASE=n);
# blkqos.only=hotpath skips the checks and only measures the hot path,
# blkqos.only=lapse runs only the lapse checks, blkqos.only=nvme only
# the NVMe topology checks (guest-nvme.sh);
# blkqos.hotpath_ios=N sets its I/O count, blkqos.hotpath_reps=N its
# pairs of runs; blkqos.only=bench runs the
# benchmark matrix of bench/kernel, blkqos.bench_ios=N I/Os per point,
# blkqos.bench_lat_reps=N latency runs per point, blkqos.bench_reps=N runs
# of the second after the last I/O, blkqos.bench_spread=P the completion
# times' spread (+/- P per cent); blkqos.bench_part=bursts runs only the
# bursts, blkqos.bench_bursts=B,B..:G,G.. their sizes and gaps (ms),
# blkqos.bench_dev=nvme the sweep on QEMU's NVMe (nvme_up);
# blkqos.stress_secs=N sets the stress run's guest seconds (default 60).

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
[ -e /proc/self ] || mount -t proc proc /proc
# blkqos.init=systemd (the stock guest): systemd is PID 1, as on the
# machines blkqos-lease.service runs on, and runs this script again from
# blkqos-check.service. Its root is a tmpfs copy of this one, switched
# to as an initramfs hands over to a real root.
if [ $$ = 1 ] && grep -q 'blkqos\.init=systemd' /proc/cmdline; then
	mkdir /newroot
	mount -t tmpfs tmpfs /newroot
	for f in $(ls -A /); do
		[ "$f" = proc ] || [ "$f" = newroot ] || cp -a "/$f" /newroot/
	done
	mkdir /newroot/proc
	umount /proc
	exec switch_root /newroot /lib/systemd/systemd
fi
# under systemd, what it mounted already stays
mnt() { # type dir
	grep -q "^[^ ]* $2 " /proc/mounts || mount -t "$1" "$1" "$2"
}
mnt sysfs /sys
mnt devtmpfs /dev
mnt configfs /sys/kernel/config
mnt debugfs /sys/kernel/debug
mnt tmpfs /run
mnt tmpfs /tmp

MODE=$(sed -n 's/.*blkqos\.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
ONLY=$(sed -n 's/.*blkqos\.only=\([a-z]*\).*/\1/p' /proc/cmdline)
HOTPATH_IOS=$(sed -n 's/.*blkqos\.hotpath_ios=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${HOTPATH_IOS:=20000}"
HOTPATH_REPS=$(sed -n 's/.*blkqos\.hotpath_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${HOTPATH_REPS:=1}"
BENCH_IOS=$(sed -n 's/.*blkqos\.bench_ios=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_IOS:=2000}"
BENCH_REPS=$(sed -n 's/.*blkqos\.bench_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_REPS:=5}"
BENCH_LAT_REPS=$(sed -n 's/.*blkqos\.bench_lat_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_LAT_REPS:=3}"
BENCH_SPREAD=$(sed -n 's/.*blkqos\.bench_spread=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_SPREAD:=50}"
STRESS_SECS=$(sed -n 's/.*blkqos\.stress_secs=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${STRESS_SECS:=60}"
IOS=64			# I/Os per idle-selection phase
SLOW_NS=1000000		# completion time that makes DEEP worth entering
CPUIDLE=/sys/devices/system/cpu/cpuidle
# the idle table (blkqos_test.idle=, the test driver's), its deepest state
# and C1's exit latency, which cpu_dma_latency and the static resume
# latency peers hold
IDLE=$(cat /sys/module/blkqos_test/parameters/idle 2>/dev/null || echo model)
DEEP=state$(($(ls -d /sys/devices/system/cpu/cpu0/cpuidle/state* | wc -l) - 1))
C1_EXIT_US=$(cat /sys/devices/system/cpu/cpu0/cpuidle/state1/latency 2>/dev/null || echo 2)
NULLB=/sys/kernel/config/nullb

pass() { echo "BLKQOS-CHECK PASS $*"; }
fail() { echo "BLKQOS-CHECK FAIL $*"; }
measure() { echo "BLKQOS-MEASURE $*"; }
expect() { # name condition-words... : pass when the test(1) expression holds
	name=$1
	shift
	if [ "$@" ]; then pass "$name"; else fail "$name" "($*)"; fi
}

mknull() { # name attr=value...
	d=$NULLB/$1
	shift
	mkdir "$d" || return 1
	for kv in "$@"; do
		echo "${kv#*=}" >"$d/${kv%%=*}" || return 1
	done
	echo 1 >"$d/power"
}

rmnull() {
	echo 0 >"$NULLB/$1/power"
	rmdir "$NULLB/$1"
}

# usage and time of the three states of a CPU: "u0 u1 u2 t0 t1 t2"
cat >/bin/idle-snap <<'EOF'
#!/bin/sh
c=/sys/devices/system/cpu/cpu$1/cpuidle
echo $(cat $c/state0/usage $c/state1/usage $c/state2/usage \
	$c/state0/time $c/state1/time $c/state2/time)
EOF
chmod 0755 /bin/idle-snap

# field N of "after - before" for two snap lines
delta() {
	echo "$1 $2" | awk -v n="$3" '{ print $(n + 6) - $n }'
}

# QD1 4k random reads pinned to CPU1; prints "iops clat_mean_us p99_us max_us"
fio_qd1() { # dev nr_ios [fio options]
	dev=$1 ios=$2
	shift 2
	fio --name=qd1 --filename="/dev/$dev" --rw=randread --bs=4k \
		--ioengine=psync --direct=1 --number_ios="$ios" --size=64m \
		--cpus_allowed=1 --norandommap --randrepeat=1 "$@" \
		--output-format=terse --terse-version=3 2>/tmp/fio.err |
		tee /tmp/fio.out |
		awk -F';' '$1 == 3 {
			p99 = 0
			for (i = 18; i <= 37; i++)
				if ($i ~ /^99\.000000%=/) { split($i, a, "="); p99 = a[2] }
			printf "%s %s %s %s\n", $8, $16, p99, $15
		}'
	if [ ! -s /tmp/fio.out ]; then
		sed 's/^/fio: /' /tmp/fio.err >&2
	fi
}

knob() { echo "/sys/block/$1/queue/cpu_lat_$2"; }

check_knob_files() {
	mknull nb0 queue_mode=2 irqmode=2 completion_nsec=$SLOW_NS \
		submit_queues=2 || fail setup-nullb-mq

	if [ "$MODE" = nopsd ]; then
		expect knobs-absent-without-psd ! -e "$(knob nb0 limit_us)" -a \
			! -e "$(knob nb0 timeout_ms)"
		return
	fi

	expect limit-default "$(cat "$(knob nb0 limit_us)")" = -1
	expect timeout-default "$(cat "$(knob nb0 timeout_ms)")" = 3
	# brd is bio-based, as md, dm and NVMe multipath heads are
	expect bio-queue-present -d /sys/block/ram0/queue
	expect knobs-absent-on-bio-queue ! -e "$(knob ram0 limit_us)" -a \
		! -e "$(knob ram0 timeout_ms)"

	for attr in limit_us timeout_ms; do
		f=$(knob nb0 $attr)
		before=$(cat "$f")
		# echo "" writes a lone newline
		for bad in "" abc 1.5 -2 100001 99999999999999999999 " 5" \
			"5 " 0x10 - "1 2" 60001x; do
			[ $attr = timeout_ms ] || [ "$bad" != 60001x ] || continue
			if echo "$bad" >"$f" 2>/tmp/err; then
				fail "reject-$attr" "'$bad' accepted"
			elif ! grep -q "Invalid argument" /tmp/err; then
				fail "reject-$attr" "'$bad': $(cat /tmp/err)"
			elif [ "$(cat "$f")" != "$before" ]; then
				fail "reject-$attr" "'$bad' changed the value"
			else
				pass "reject-$attr '$bad'"
			fi
		done
	done
	for bad in 0 -1 60001 4294967296; do
		f=$(knob nb0 timeout_ms)
		if echo $bad >"$f" 2>/dev/null; then
			fail "reject-timeout_ms" "'$bad' accepted"
		else
			pass "reject-timeout_ms '$bad'"
		fi
	done
	for good in 0 10 100000 auto -1; do
		echo $good >"$(knob nb0 limit_us)"
		expect "accept-limit_us $good" "$(cat "$(knob nb0 limit_us)")" = $good
	done
	for good in 1 60000 3; do
		echo $good >"$(knob nb0 timeout_ms)"
		expect "accept-timeout_ms $good" \
			"$(cat "$(knob nb0 timeout_ms)")" = $good
	done
}

# One phase: set the limit, run QD1 I/O on CPU1, report CPU1's state use.
phase() { # governor limit nr_ios
	echo "$2" >"$(knob nb0 limit_us)"
	# count only while fio does I/O, not while it starts and exits
	res=$(fio_qd1 nb0 "$3" --exec_prerun="sh -c 'idle-snap 1 >/tmp/pre'" \
		--exec_postrun="sh -c 'idle-snap 1 >/tmp/post'")
	before=$(cat /tmp/pre)
	after=$(cat /tmp/post)
	P_POLL=$(delta "$before" "$after" 1)
	P_C1=$(delta "$before" "$after" 2)
	P_DEEP=$(delta "$before" "$after" 3)
	measure "idle gov=$1 limit=$2 ios=$3 poll=$P_POLL c1=$P_C1" \
		"deep=$P_DEEP fio=$(echo $res | tr ' ' ,)"
	echo -1 >"$(knob nb0 limit_us)"
}

check_governor() { # governor
	g=$1
	echo "$g" >$CPUIDLE/current_governor
	expect "governor-$g" "$(cat $CPUIDLE/current_governor_ro)" = "$g"
	echo 3 >"$(knob nb0 timeout_ms)"

	phase "$g" -1 $IOS
	off_c1=$P_C1 off_deep=$P_DEEP
	phase "$g" 10 $IOS
	lim_c1=$P_C1 lim_deep=$P_DEEP
	# "auto": the deepest state that takes at most 20 us to leave, C1 here
	phase "$g" auto $IOS
	auto_c1=$P_C1 auto_deep=$P_DEEP
	phase "$g" 0 $IOS
	zero_c1=$P_C1 zero_deep=$P_DEEP

	few=$((IOS / 8))
	expect "$g-off-enters-deep" "$off_deep" -ge $((IOS / 2))
	expect "$g-limit10-no-deep" "$lim_deep" -le $few
	expect "$g-limit10-uses-c1" "$lim_c1" -ge $((IOS / 2))
	expect "$g-auto-no-deep" "$auto_deep" -le $few
	expect "$g-auto-uses-c1" "$auto_c1" -ge $((IOS / 2))
	expect "$g-limit0-no-c1" "$zero_c1" -le $few
	expect "$g-limit0-no-deep" "$zero_deep" -le $few
}

TEST=/sys/kernel/debug/blkqos_test
TICK_US=4000	# CONFIG_HZ_250

# "auto" never means polling: with C1 disabled on the I/O CPU, the only
# halting state left (DEEP) stays allowed rather than POLL being forced.
check_auto_not_poll() {
	c1=/sys/devices/system/cpu/cpu1/cpuidle/state1/disable
	echo menu >$CPUIDLE/current_governor
	echo 1 >$c1
	# menu polls now and then by itself (29-54 entries here, knob off or
	# auto); a lease that polls halts never: v2 gave poll=256 deep=0
	phase menu auto $IOS
	echo 0 >$c1
	expect "auto-with-c1-disabled-never-polls poll=$P_POLL deep=$P_DEEP" \
		"$P_DEEP" -ge $((IOS / 2))
}

# Two writers, one per knob and CPU, racing (each store held 300 us
# between its read and its write by the test driver). One writes the limit 1, 2,
# ... n and reads each back: a store of the other knob that read the old
# limit and wrote it back after this one shows as a limit that went back
# (the v2 stores, unserialized since 6.15). The pair kept at the end is
# the last one each wrote, in the attributes and in the lease the I/O
# then takes. Run in a guest without -icount and with a host thread per
# vCPU (blkqos.only=race, -accel tcg,thread=multi): under -icount the
# vCPUs run in turn and two stores hardly ever interleave. The last pair
# (500 us: rules out nothing here; 60 s) leaves a lease that changes no
# later check.
check_knob_race() {
	# 500 rounds: v2 lost 78 of 2000 (about 20 expected here), and each
	# round forks under an emulated CPU
	n=500 l=$(knob nb0 limit_us) t=$(knob nb0 timeout_ms)
	# each store waits 300 us between reading the setting and writing
	# it (test driver), so that two stores overlap often
	echo 300 >$TEST/store_delay_us
	(i=1 back=0
	 while [ $i -le $n ]; do
		echo $i >"$l"
		[ "$(cat "$l")" -ge $i ] || back=$((back + 1))
		i=$((i + 1))
	 done
	 echo $back >/tmp/race-back) &
	a=$!
	(i=0; while [ $i -lt $((n * 2)) ]; do echo 7 >"$t"; echo 60000 >"$t"
		i=$((i + 1)); done) &
	b=$!
	taskset -p -c 0 $a >/dev/null
	taskset -p -c 1 $b >/dev/null
	wait $a $b
	echo 0 >$TEST/store_delay_us
	back=$(cat /tmp/race-back)
	lim=$(cat "$l")
	tmo=$(cat "$t")
	fio_qd1 nb0 1 >/dev/null
	left=$(lease_of 1 | sed -n 's/.*left_ms=\([0-9]*\).*/\1/p')
	measure "knob-race rounds=$n limit_went_back=$back"
	expect "knobs-racing-lose-no-store went_back=$back/$n" "$back" = 0
	expect "knobs-racing-keep-last-pair limit=$lim timeout=$tmo left_ms=$left" \
		"$lim" = $n -a "$tmo" = 60000 -a "${left:-0}" -gt 30000
	echo -1 >"$l"
	echo 3 >"$t"
}

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
# (12 ms for 3 ms at HZ=250); the check allows the governor one more
# tick to choose the deep state, as teo, going by its recent history,
# may decline it once.
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
check_irq_cpu_burst() { # governor
	g=$1
	echo "$g" >$CPUIDLE/current_governor
	mknull ib queue_mode=2 irqmode=2 completion_nsec=200000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 || fail setup-ib
	echo 2 >/sys/block/ib/queue/rq_affinity
	echo 3 >"$(knob ib timeout_ms)"
	# an idle queue keeps its knob on throughout, so that ib's turns do
	# not flip the static key: a flip patches kernel text, and its IPIs
	# to every CPU would count as the lease's
	mknull ik queue_mode=2 irqmode=1 submit_queues=2 || fail setup-ik
	echo 10 >"$(knob ik limit_us)"
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
	rmnull ik
	echo menu >$CPUIDLE/current_governor
}

burst_checks() {
	check_irq_cpu_burst menu
	check_irq_cpu_burst teo
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
		a=$(cat /sys/devices/system/cpu/cpu$cpu/cpuidle/cpu_lat_lease)
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
		f=/sys/devices/system/cpu/cpu$cpu/cpuidle/cpu_lat_lease
		held=0 bad= i=0
		while [ $i -lt 20 ]; do
			set -- $(cat $f)
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
	for cpu in 0 1; do
		set -- $(cat /sys/devices/system/cpu/cpu$cpu/cpuidle/cpu_lat_lease)
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

# The series' KUnit suites, built as modules (KUNIT_ALL_TESTS=m), on the
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

check_hotplug() {
	echo 60000 >"$(knob nb0 timeout_ms)"
	echo 10 >"$(knob nb0 limit_us)"
	fio_qd1 nb0 8 >/dev/null
	live=$(lease_of 1)
	expect "lease-live-before-offline $live" "${live%% *}" = limit_us=10
	ok=1
	echo 0 >/sys/devices/system/cpu/cpu1/online || ok=0
	echo 1 >/sys/devices/system/cpu/cpu1/online || ok=0
	expect cpu-offline-online-with-lease $ok = 1
	# a stale deadline would look live again after 2^31 jiffies offline
	back=$(lease_of 1)
	expect "lease-reset-by-offline-online $back" "${back%% *}" = limit_us=-1
	res=$(fio_qd1 nb0 8)
	expect io-after-hotplug -n "$res"
	echo -1 >"$(knob nb0 limit_us)"
	echo 3 >"$(knob nb0 timeout_ms)"
}

# blkqos itself against the guest's real sysfs
check_blkqos() {
	cat >/tmp/p.toml <<-EOF
	[[rule]]
	name = "nullb"
	match = { name = "nb0" }
	cpu_lat_limit_us = 20
	cpu_lat_timeout_ms = 7
	EOF
	blkqos apply /tmp/p.toml >/tmp/out 2>&1
	expect blkqos-apply $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = 20 \
		-a "$(cat "$(knob nb0 timeout_ms)")" = 7
	blkqos verify /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-verify $? = 0
	echo 30 >"$(knob nb0 limit_us)"
	blkqos verify /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-verify-sees-drift $? -ne 0
	blkqos restore >>/tmp/out 2>&1
	expect blkqos-restore $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = -1 \
		-a "$(cat "$(knob nb0 timeout_ms)")" = 3
	# the hotplug path, with the device path udev would give
	dp=$(readlink -f /sys/block/nb0)
	dp=${dp#/sys}
	ACTION=add DEVPATH=$dp blkqos udev /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-udev-add $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = 20
	# no syslog socket yet, as in early boot: the kernel log has it
	dmesg | grep -q 'blkqos\[[0-9]*\]: nb0: rule "nullb": queue/cpu_lat_limit_us -1 -> 20'
	expect blkqos-udev-logs-to-kmsg $? = 0
	blkqos udev --action add --devpath "$dp/../../../.." /tmp/p.toml \
		>>/tmp/out 2>&1
	expect blkqos-udev-refuses-escape $? = 2
	# a remove while the disk is there (udevadm trigger -c remove) is
	# refused: its values and saved originals stay; the real removal is
	# checked with udevd (udevd-remove-forgets)
	ACTION=remove DEVPATH=$dp blkqos udev /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-udev-remove-present-refused $? = 2 \
		-a "$(cat "$(knob nb0 limit_us)")" = 20
	blkqos restore >>/tmp/out 2>&1
	expect blkqos-restore-after-udev $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = -1
	grep -q . /tmp/out && sed 's/^/blkqos: /' /tmp/out
}

# A real systemd-udevd with the project's rule, and a syslogd that keeps
# blkqos's log lines in /tmp/messages.
start_udevd() { # check name
	mkdir -p /run/udev
	pidof syslogd >/dev/null || syslogd -O /tmp/messages || fail syslogd-start
	systemd-udevd --daemon --resolve-names=never 2>/tmp/udevd.err ||
		fail "$1" "$(cat /tmp/udevd.err)"
	udevadm settle -t 30
}

# null_blk disks PREFIX0 .. PREFIX<N-1> completing at once, and back
mknulls() { # prefix n
	i=0
	while [ $i -lt "$2" ]; do
		mknull "$1$i" queue_mode=2 irqmode=0 || fail "setup-$1$i"
		i=$((i + 1))
	done
}

rmnulls() { # prefix n
	i=0
	while [ $i -lt "$2" ]; do
		rmnull "$1$i"
		i=$((i + 1))
	done
}

# how many of the disks PREFIX* hold the limit (and the timeout, if given)
count_tuned() { # prefix limit_us [timeout_ms]
	c=0
	for d in /sys/block/"$1"*; do
		[ "$(cat $d/queue/cpu_lat_limit_us)" = "$2" ] || continue
		[ -z "${3:-}" ] || [ "$(cat $d/queue/cpu_lat_timeout_ms)" = "$3" ] ||
			continue
		c=$((c + 1))
	done
	echo $c
}

# The hotplug path end to end: a real systemd-udevd runs the project's
# rule, which runs blkqos udev for every disk that comes and goes.
check_udevd() {
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF
	[[rule]]
	name = "hotplug"
	match = { name = "ud*" }
	cpu_lat_limit_us = 15
	cpu_lat_timeout_ms = 9
	EOF
	start_udevd udevd-start
	n=50
	mknulls ud $n
	udevadm settle -t 120
	tuned=$(count_tuned ud 15 9)
	expect "udevd-add-tunes-all $tuned/$n" $tuned = $n
	blkqos verify /etc/blkqos/blkqos.toml >/dev/null 2>&1
	expect udevd-state-verifies $? = 0
	saved=$(grep -o '"block/ud[0-9]*/queue/cpu_lat_limit_us"' \
		/run/blkqos/state.json | sort -u | wc -l)
	expect "udevd-state-has-every-original $saved/$n" "$saved" = $n
	logged=$(grep -o 'blkqos\[[0-9]*\]: ud[0-9]*: rule "hotplug": queue/cpu_lat_limit_us -1 -> 15' \
		/tmp/messages | sed 's/.*: \(ud[0-9]*\): .*/\1/' | sort -u | wc -l)
	expect "udevd-add-logged-per-disk $logged/$n" "$logged" = $n

	echo 30 >/sys/block/ud3/queue/cpu_lat_limit_us
	udevadm trigger --action=change --subsystem-match=block
	udevadm settle -t 120
	expect udevd-change-reapplies "$(cat /sys/block/ud3/queue/cpu_lat_limit_us)" = 15

	rmnulls ud $n
	udevadm settle -t 120
	left=$(grep -c '"block/ud' /run/blkqos/state.json)
	expect "udevd-remove-forgets $left" "$left" = 0
	logged=$(grep -o 'blkqos\[[0-9]*\]: ud[0-9]*: removed; forgot 2 saved' \
		/tmp/messages | sed 's/.*: \(ud[0-9]*\): .*/\1/' | sort -u | wc -l)
	expect "udevd-remove-logged-per-disk $logged/$n" "$logged" = $n
	udevadm control --exit
}

# An event storm on the real udevd and the rule: 100 disks added at once,
# then 1000 change events over them (10 rounds of a trigger, not waited
# for). blkqos runs through event-time, which logs each event's wall time
# and exit status: every disk tuned, every event run and exited 0 (a run
# that gave up on the state lock would exit 3), and the figures.
secs_between() { # from to (seconds, from /proc/uptime)
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'
}

check_udev_storm() {
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF
	[[rule]]
	name = "storm"
	match = { name = "sm*" }
	cpu_lat_limit_us = 12
	cpu_lat_timeout_ms = 5
	EOF
	ln -sf /bin/event-time /usr/sbin/blkqos
	rm -f /tmp/event-times
	start_udevd udev-storm-start
	n=100
	t0=$(cut -d' ' -f1 /proc/uptime)
	mknulls sm $n
	udevadm settle -t 600
	t1=$(cut -d' ' -f1 /proc/uptime)
	tuned=$(count_tuned sm 12)
	expect "udev-storm-add-tunes-all $tuned/$n" $tuned = $n
	[ $tuned = $n ] || head -3 /tmp/event-times
	adds=$(awk '$3 == "add" && $4 ~ /sm[0-9]/' /tmp/event-times | wc -l)
	expect "udev-storm-add-events $adds/$n" "$adds" = $n
	add_max=$(awk '$3 == "add" { if ($1 > m) m = $1 } END { printf "%.1f", m / 1e6 }' /tmp/event-times)

	for d in /sys/block/sm*; do
		echo -1 >$d/queue/cpu_lat_limit_us
	done
	r=0
	while [ $r -lt 10 ]; do
		udevadm trigger --action=change --subsystem-match=block \
			--sysname-match='sm*'
		r=$((r + 1))
	done
	udevadm settle -t 600
	t2=$(cut -d' ' -f1 /proc/uptime)
	changes=$(awk '$3 == "change" && $4 ~ /sm[0-9]/' /tmp/event-times | wc -l)
	expect "udev-storm-change-events $changes/$((n * 10))" "$changes" = $((n * 10))
	bad=$(awk '$2 != 0' /tmp/event-times | wc -l)
	expect "udev-storm-every-run-exits-0 $bad" "$bad" = 0
	tuned=$(count_tuned sm 12)
	expect "udev-storm-change-retunes-all $tuned/$n" $tuned = $n
	blkqos verify /etc/blkqos/blkqos.toml >/dev/null 2>&1
	expect udev-storm-verifies $? = 0
	stats=$(awk '$3 == "change" { print $1 }' /tmp/event-times | sort -n | awk '
		{ v[NR] = $1 } END {
			printf "change_p50_ms=%.1f change_p99_ms=%.1f change_max_ms=%.1f",
				v[int(NR / 2) + 1] / 1e6, v[int(NR * 0.99) + 1] / 1e6, v[NR] / 1e6 }')
	measure "udev_storm disks=$n add_secs=$(secs_between "$t0" "$t1")" \
		"add_max_ms=$add_max change_events=$changes" \
		"change_secs=$(secs_between "$t1" "$t2") $stats"
	rmnulls sm $n
	udevadm settle -t 600
	udevadm control --exit
	ln -sf ../bin/blkqos /usr/sbin/blkqos
}

# Stress on the lock-debugging kernel: I/O on two devices while a loop
# writes valid and invalid values to both knobs, takes CPU1 offline and
# back, and switches governors; the console must stay clean (verdict in
# the harness) and the knobs must hold the last valid values written.
check_stress() {
	secs=$STRESS_SECS
	mknull st0 queue_mode=2 irqmode=2 completion_nsec=100000 \
		submit_queues=2 || fail setup-st0
	mknull st1 queue_mode=2 irqmode=1 submit_queues=2 || fail setup-st1
	for d in st0 st1; do
		fio --name=$d --filename=/dev/$d --rw=randread --bs=4k \
			--ioengine=libaio --iodepth=2 --direct=1 --time_based \
			--runtime=$((secs + 2)) --size=64m --thinktime=50 \
			--output-format=terse --terse-version=3 \
			>/tmp/$d.out 2>/tmp/$d.err &
	done
	end=$(($(cut -d. -f1 /proc/uptime) + secs))
	i=0 refused=0 accepted_bad=0 failed_good=0 cycles=0 switches=0
	while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
		i=$((i + 1))
		l0=$(((i * 7919) % 41 - 1)) l1=$(((i * 104729) % 41 - 1))
		t0=$((i % 9 + 1)) t1=$((i % 7 + 1))
		for bad in x 100001 -2 "1 2"; do
			if echo "$bad" >"$(knob st$((i % 2)) limit_us)" 2>/dev/null; then
				accepted_bad=$((accepted_bad + 1))
			else
				refused=$((refused + 1))
			fi
		done
		echo $l0 >"$(knob st0 limit_us)" || failed_good=$((failed_good + 1))
		echo $l1 >"$(knob st1 limit_us)" || failed_good=$((failed_good + 1))
		echo $t0 >"$(knob st0 timeout_ms)" || failed_good=$((failed_good + 1))
		echo $t1 >"$(knob st1 timeout_ms)" || failed_good=$((failed_good + 1))
		if [ $((i % 25)) = 0 ]; then
			echo 0 >/sys/devices/system/cpu/cpu1/online &&
				echo 1 >/sys/devices/system/cpu/cpu1/online &&
				cycles=$((cycles + 1))
		fi
		if [ $((i % 10)) = 0 ]; then
			[ $((i % 20)) = 0 ] && g=menu || g=teo
			echo $g >$CPUIDLE/current_governor && switches=$((switches + 1))
		fi
		sleep 0.02
	done
	wait
	echo menu >$CPUIDLE/current_governor
	ios=0
	for d in st0 st1; do
		n=$(awk -F';' '$1 == 3 { print $6 }' /tmp/$d.out)
		ios=$((ios + ${n:-0}))
	done
	expect "stress-knobs-hold-last-values" \
		"$(cat "$(knob st0 limit_us)") $(cat "$(knob st1 limit_us)")" = "$l0 $l1" -a \
		"$(cat "$(knob st0 timeout_ms)") $(cat "$(knob st1 timeout_ms)")" = "$t0 $t1"
	expect "stress-invalid-refused $refused/$((refused + accepted_bad))" $accepted_bad = 0
	expect "stress-valid-accepted" $failed_good = 0
	expect "stress-io-done $ios" $ios -gt 0
	expect "stress-hotplug-cycles $cycles" $cycles -gt 0
	measure "stress secs=$secs loops=$i knob_writes=$((i * 8)) invalid=$refused" \
		"hotplug_cycles=$cycles governor_switches=$switches ios=$ios"
	rmnull st0
	rmnull st1
}

# Hot-path cost: the fio CPU never idles. irqmode 0 completes inline,
# 1 in a softirq on the same CPU.
hot_path() { # [irqmode]
	irq=${1:-0}
	# with one hardware queue per CPU blk-mq ends "softirq" completions
	# inline; with one for both CPUs it raises BLOCK_SOFTIRQ
	[ "$irq" = 1 ] && hwq=1 || hwq=2
	mknull hp queue_mode=2 irqmode=$irq submit_queues=$hwq || fail setup-nullb-hp
	fio_qd1 hp 2000 >/dev/null	# warm up
	# each figure 2 x HOTPATH_REPS times in the same guest, interleaved,
	# the knob's two settings in turn, in either order by turns
	n=1
	while [ $n -le $((2 * HOTPATH_REPS)) ]; do
		if [ "$MODE" != psd ]; then
			hot_run "$MODE"
		elif [ $((n % 2)) = 1 ]; then
			hot_run off
			hot_run on
		else
			hot_run on
			hot_run off
		fi
		n=$((n + 1))
	done
	rmnull hp
}
hot_run() { # variant
	[ "$1" != on ] || echo 10 >"$(knob hp limit_us)"
	measure "hotpath variant=$1 $(fio_qd1 hp "$HOTPATH_IOS" | tr ' ' ,) irq=$irq run=$n"
	# QD32 through libaio where completions come from the softirq
	[ "$irq" != 1 ] ||
		measure "hotpath32 variant=$1 $(fio_qd1 hp "$HOTPATH_IOS" --ioengine=libaio \
			--iodepth=32 | tr ' ' ,) irq=$irq run=$n"
	[ "$1" != on ] || echo -1 >"$(knob hp limit_us)"
}

# The benchmark's CPUs (3 vCPUs: kernel-patch/test/run sets SMP=3 for
# it): fio submits on CPU1; CPU2 is the "device", the CPU whose null_blk
# timer (complete_cpu) stands for the device's work and raises each
# completion on CPU0 or CPU1 by IPI (irq_cpu), as an MSI-X vector would.
# No CPU that does I/O then holds a timer telling its governor when the
# completion comes. CPUs 0 and 1 are the I/O CPUs the peers act on.
DEV_CPU=2
IO_CPUS="0 1"
# the device the peers run on and the CPU fio submits on (bx_up sets them)
BX=bx
SUB_CPU=1
BENCH_DEV=$(sed -n 's/.*blkqos\.bench_dev=\([a-z_]*\).*/\1/p' /proc/cmdline)
: "${BENCH_DEV:=null_blk}"

# Where every CPU's time went between the idle-watch snaps in /tmp/pre
# and /tmp/post (one line per CPU, however many the guest has):
# " deepN_pct= spinN_pct= c1_N_pct= pollN_pct=" per CPU N, per cent
cpu_shares() {
	paste -d' ' /tmp/pre /tmp/post | awk '{
		c = NR - 1; pct = 100000 / ($12 - $6); spin = $5 * ($10 - $4)
		printf " deep%d_pct=%.1f spin%d_pct=%.1f c1_%d_pct=%.1f poll%d_pct=%.1f",
			c, ($9 - $3 - spin) * pct, c, spin * pct, c, ($8 - $2) * pct,
			c, ($7 - $1) * pct }'
}

# Latency of QD1/QD4 4k random reads on CPU1 through libaio, and where
# every CPU's time went while fio ran (idle-watch snap at both ends, each
# CPU read on itself): prints "iops= mean= p50= p99= p999= max=" (us) and,
# per CPU N, "deepN_pct= spinN_pct= c1_N_pct= pollN_pct=" shares in per
# cent (deep: halted in the deep state; spin: paying its exit latency)
fio_lat() { # dev iodepth nr_ios
	rm -f /tmp/pre /tmp/post /tmp/fio.out
	fio --name=lat --filename="/dev/$1" --rw=randread --bs=4k \
		--ioengine=libaio --iodepth="$2" --direct=1 --number_ios="$3" \
		--size=64m --cpus_allowed="$SUB_CPU" --norandommap --randrepeat=1 \
		--percentile_list=50:99:99.9 --output-format=terse \
		--terse-version=3 \
		--exec_prerun="sh -c 'idle-watch snap >/tmp/pre'" \
		--exec_postrun="sh -c 'idle-watch snap >/tmp/post'" \
		2>/tmp/fio.err >/tmp/fio.out
	[ -s /tmp/pre ] && [ -s /tmp/post ] || fail "idle-watch-snap $1 qd$2"
	shares=$(cpu_shares)
	awk -F';' -v shares="$shares" '$1 == 3 {
		p50 = p99 = p999 = 0
		for (i = 18; i <= 37; i++) {
			split($i, a, "=")
			if (a[1] == "50.000000%") p50 = a[2]
			if (a[1] == "99.000000%") p99 = a[2]
			if (a[1] == "99.900000%") p999 = a[2]
		}
		printf "iops=%s mean=%s p50=%s p99=%s p999=%s max=%s%s\n",
			$8, $16, p50, p99, p999, $15, shares
	}' /tmp/fio.out
	[ -s /tmp/fio.out ] || sed 's/^/fio: /' /tmp/fio.err >&2
}

# The peers, each set up on its own on device bx (the lease kernel):
#   baseline  deep state allowed, nothing set (what most machines run)
#   floor     deep state disabled on the I/O CPUs ("C-states off",
#             cpupower idle-set -D; the device CPU has it off throughout)
#   dma       /dev/cpu_dma_latency held open at C1's exit latency (TuneD
#             latency-performance): global by nature, for as long as it
#             is held; on the device CPU it changes nothing (deep already
#             off there, C1 still allowed)
#   resume    pm_qos_resume_latency_us at C1's exit latency on the I/O
#             CPUs 0 and 1 (TuneD cpu plugin, pepc, blkqos's fallback:
#             per CPU, static)
#   knob10, knob0, auto   this series: cpu_lat_limit_us, 3 ms timeout
#   psd       the PSD model kernel with its model on (psd.enabled=1);
#             its baseline and floor are the same kernel with it off
#   psd_cpu0_floor  the same with the deep state off on CPU0, which takes
#             the interrupt in the cross shape
# Each starts from a governor without history: switching the governor
# away and back clears its per-CPU data (menu's intervals and correction
# factors, teo's bins), which the previous configuration would otherwise
# hand on to the next.
PSD_ON=/sys/module/psd/parameters/enabled
peer_off() {
	deep_disabled 0
	[ ! -e $PSD_ON ] || echo 0 >$PSD_ON
	exec 7>&-
	[ -z "${bl_pid:-}" ] || {
		kill -TERM "$bl_pid"
		wait "$bl_pid"
		bl_pid=
	}
	for c in $IO_CPUS; do
		echo 0 >/sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us
	done
	[ ! -e "$(knob $BX limit_us)" ] || {
		echo -1 >"$(knob $BX limit_us)"
		echo 3 >"$(knob $BX timeout_ms)"
	}
}

peer_on() { # cfg
	peer_off
	case $1 in
	floor) deep_disabled 1 ;;
	dma)
		exec 7>/dev/cpu_dma_latency
		# anything but 4 bytes is read as a hexadecimal number
		printf '%x' $C1_EXIT_US >&7 ;;
	resume)
		for c in $IO_CPUS; do
			echo $C1_EXIT_US >/sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us
		done ;;
	psd) echo 1 >$PSD_ON ;;
	psd_cpu0_floor)
		echo 1 >$PSD_ON
		echo 1 >/sys/devices/system/cpu/cpu0/cpuidle/$DEEP/disable ;;
	knob10) echo 10 >"$(knob $BX limit_us)" ;;
	ulease) bench_lease ;;
	knob0) echo 0 >"$(knob $BX limit_us)" ;;
	auto) echo auto >"$(knob $BX limit_us)" ;;
	esac
	sleep 0.05	# let a lease from the previous configuration lapse
	g=$(cat $CPUIDLE/current_governor)
	echo ladder >$CPUIDLE/current_governor
	echo "$g" >$CPUIDLE/current_governor
}

# blkqos lease on the stock kernel, as knob10 on the lease kernel: 10 us,
# 3 ms after the last I/O; running once it has taken the device's grant
bench_lease() {
	mkdir -p /etc/blkqos
	printf '[[rule]]\nname = "bx"\nmatch = { name = "%s" }\ncpu_lat_limit_us = 10\ncpu_lat_timeout_ms = 3\n' "$BX" \
		>/etc/blkqos/bench.toml
	: >/tmp/bench-lease.log
	blkqos lease --detect tracepoint /etc/blkqos/bench.toml 2>/tmp/bench-lease.log &
	bl_pid=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q "$BX: CPUs .* held at 10 us" /tmp/bench-lease.log; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 100 ] || fail "bench-lease-start $(cat /tmp/bench-lease.log)"
}

# the words of $2.. rotated left by $1: each repeat runs the peers in
# another order, so that no peer always follows the same one
rotate() { # n word...
	n=$1
	shift
	while [ "$n" -gt 0 ] && [ $# -gt 0 ]; do
		first=$1
		shift
		set -- "$@" "$first"
		n=$((n - 1))
	done
	echo "$@"
}

# the deep state of the I/O CPUs only: the device CPU keeps it off
# (device_deep_off) whatever a peer does
deep_disabled() { # 0|1
	for c in $IO_CPUS; do
		echo "$1" >/sys/devices/system/cpu/cpu$c/cpuidle/$DEEP/disable
	done
}

# The device CPU stays out of the deep state for the whole bench: its
# 150 us wake-up would add to every completion, the same for every peer,
# and hide what the peers change. It keeps POLL and C1 (a halt): a CPU
# polling busily would, under -icount with round-robin TCG, eat the other
# vCPUs' virtual time.
device_deep_off() {
	[ "$BENCH_DEV" = null_blk ] || return 0
	echo 1 >/sys/devices/system/cpu/cpu$DEV_CPU/cpuidle/$DEEP/disable
}

# The device: its delays are spread over +/- spread per cent of cus us,
# drawn from a seed set when it is made, so every peer and every repeat
# sees the same delays in the same order. shape "local": the interrupt
# lands on CPU1, the submitter (one vector per CPU, the common NVMe case);
# "cross": on CPU0, and blk-mq sends the completion to CPU1 by IPI
# (rq_affinity=2: fewer vectors than CPUs).
bx_up() { # cus spread shape
	[ "$BENCH_DEV" = null_blk ] || {
		nvme_up "$1" "$3"
		return
	}
	case $3 in
	local) irq=1 ;;
	*) irq=0 ;;
	esac
	mknull bx queue_mode=2 irqmode=2 completion_nsec=$(($1 * 1000)) \
		submit_queues=3 complete_cpu=$DEV_CPU irq_cpu=$irq \
		complete_spread_pct="$2" ${BX_EXTRA:-} || fail setup-nullb-bx
	echo 2 >/sys/block/bx/queue/rq_affinity
}
bx_down() {
	[ "$BENCH_DEV" != null_blk ] || rmnull bx
}

# QEMU's NVMe (blkqos.bench_dev=nvme): its interrupts are MSI-X messages
# through the emulated APIC, its completion time a null-co namespace's
# latency-ns, fixed, in host time (the guest runs without -icount).
# kernel-patch/test/run nvme_bench_args gives one controller per shape
# and completion time, serial BENCH<shape><us>: "cross" has one I/O
# queue, whose vector lands on a CPU of the APIC's choosing, and fio
# submits on another; "local" has a queue per CPU, fio on CPU1 and the
# vector of its queue on CPU1. IO_CPUS: the vector's CPU and fio's.
nvme_has_disk() { [ -n "$(nvme_disks_of "$1")" ]; }
nvme_up() { # cus shape
	local d ctrl q irq
	BX= ctrl=
	for d in /sys/class/nvme/nvme*; do
		# the serial as the controller reports it, blank-padded
		[ "$(tr -d ' ' <"$d/serial")" != "BENCH$2$1" ] || ctrl=${d##*/}
	done
	# the namespace scan is asynchronous: wait for it (10 s)
	nvme_wait 200 nvme_has_disk "$ctrl" || true
	BX=$(nvme_disks_of "$ctrl" | head -1)
	[ -n "$BX" ] || {
		fail "bench-nvme-device BENCH$2$1"
		return 1
	}
	echo 2 >/sys/block/$BX/queue/rq_affinity
	# the hardware queue CPU1 submits to, numbered from 1 as its vector
	q=1
	for d in /sys/block/$BX/mq/*; do
		tr -d ' ' <"$d/cpu_list" | tr , '\n' | grep -qx 1 || continue
		q=$((${d##*/} + 1))
	done
	irq=$(awk -v n="${ctrl}q$q" '$NF == n { sub(":", "", $1); print $1 }' /proc/interrupts)
	IRQ_CPU=$(cat /proc/irq/"$irq"/effective_affinity_list)
	SUB_CPU=1
	[ "$2" = local ] || [ "$IRQ_CPU" != 1 ] || SUB_CPU=0
	IO_CPUS=$(printf '%s\n' "$IRQ_CPU" "$SUB_CPU" | sort -u | tr '\n' ' ')
}

# Every configuration twice, as "cfg:a" and "cfg:b", the second copy a
# whole round of the others after the first: the spread between the two
# (an A/A pair) is the noise a difference between peers must exceed.
aa_pairs() { # cfg...
	for r in a b; do
		for c in "$@"; do
			printf '%s:%s ' "$c" "$r"
		done
	done
}

# REPS repeats of every configuration as an A/A pair, the runs in a
# rotated order each repeat, each on a device made again (cus us, +/-
# spread, shape) with its peer set up: BODY runs with cfg, aa (a or b)
# and rep set.
pair_runs() { # reps cus spread shape body cfg...
	pr_reps=$1 pr_cus=$2 pr_spread=$3 pr_shape=$4 pr_body=$5
	shift 5
	rep=1
	while [ $rep -le "$pr_reps" ]; do
		for run in $(rotate $((rep - 1)) $(aa_pairs "$@")); do
			cfg=${run%:*} aa=${run#*:}
			bx_up "$pr_cus" "$pr_spread" "$pr_shape" || continue
			peer_on "$cfg"
			$pr_body
			peer_off
			bx_down
		done
		rep=$((rep + 1))
	done
}

# One point (shape, governor, completion time): BENCH_LAT_REPS latency
# runs at QD1 and QD4 and BENCH_REPS runs of the second after the last
# I/O (which varies with the governors' history), each an A/A pair, the
# runs in a rotated order each repeat, the device made again for every
# run; repeats differ only in the governors' and the tick's phase.
bench_point() { # shape gov cus spread cfgs...
	shape=$1 g=$2 cus=$3 spread=$4
	shift 4
	pair_runs "$BENCH_LAT_REPS" "$cus" "$spread" "$shape" lat_run "$@"
	pair_runs "$BENCH_REPS" "$cus" "$spread" "$shape" power_run "$@"
}
lat_run() {
	for qd in 1 4; do
		measure "lat kernel=$MODE idle=$IDLE dev=$BENCH_DEV irq_cpu=${IRQ_CPU:--1} sub_cpu=$SUB_CPU shape=$shape gov=$g cus=$cus spread=$spread qd=$qd cfg=$cfg aa=$aa rep=$rep ios=$BENCH_IOS" \
			"$(fio_lat "$BX" $qd "$BENCH_IOS")"
	done
}
power_run() {
	measure "power kernel=$MODE idle=$IDLE dev=$BENCH_DEV irq_cpu=${IRQ_CPU:--1} sub_cpu=$SUB_CPU shape=$shape gov=$g cus=$cus spread=$spread cfg=$cfg aa=$aa rep=$rep" \
		"$(idle-watch /dev/"$BX" "$SUB_CPU" 200 1000000)"
}

# The peers of this guest's kernel in a shape
bench_cfgs() { # shape
	if [ "$MODE" = psdmodel ]; then
		# psd_cpu0_floor: how much of PSD's tail is CPU0, which takes
		# the interrupt but submits nothing, so PSD never holds it (no
		# such CPU in the local shape)
		echo baseline floor psd
		[ "$1" = local ] || echo psd_cpu0_floor
	elif [ "$MODE" = stock ]; then
		# no knobs: the static fallback and blkqos lease
		echo baseline floor resume ulease
	else
		echo baseline floor dma resume knob10 knob0 auto
	fi
}

# Bursts after idle gaps, as a server sees between batches of queries:
# bursts of B reads at QD1 from CPU1 with G ms of sleep before each
# (blkqos.bench_bursts=B,B..:G,G..; default 1,8,64,512:1,2,4,8,16,64,
# "none" for no bursts), on the 50 us device (+/- the spread), in both
# shapes, under menu, every peer as an A/A pair, BENCH_LAT_REPS times. A
# run has at least 10 bursts, up to 200, and about 2,000 reads where
# that allows (at 10 or 30 bursts a p99 is their maximum). Prints the first read's and the others' p50/p90/p99/max
# and where every CPU's time went over the whole run: a peer that holds
# the CPUs through the gaps buys the first read's latency with the deep
# residency the gap could have had. The device CPU keeps its deep state
# off, as in the sweep; one run is thrown away first (the first runs of a
# boot are slower).
bench_bursts() {
	spec=$(sed -n 's/.*blkqos\.bench_bursts=\([0-9a-z,:]*\).*/\1/p' /proc/cmdline)
	[ "$spec" != none ] || return 0
	: "${spec:=1,8,64,512:1,2,4,8,16,64}"
	device_deep_off
	echo menu >$CPUIDLE/current_governor
	bx_up 50 "$BENCH_SPREAD" local
	idle-watch burst /dev/bx 1 8 2000 50 >/dev/null
	rmnull bx
	for shape in local cross; do
		cfgs=$(bench_cfgs $shape)
		for b in $(echo "${spec%%:*}" | tr , ' '); do
			# at most about 2,000 reads a run, at least 10 bursts
			nr=$((2000 / b))
			[ $nr -le 200 ] || nr=200
			[ $nr -ge 10 ] || nr=10
			for gms in $(echo "${spec#*:}" | tr , ' '); do
				measure "benchpoint kernel=$MODE shape=$shape gov=menu burst=$b gap_ms=$gms uptime=$(cut -d' ' -f1 /proc/uptime)"
				pair_runs "$BENCH_LAT_REPS" 50 "$BENCH_SPREAD" "$shape" burst_run $cfgs
			done
		done
	done
}
burst_run() {
	idle-watch snap >/tmp/pre
	r=$(idle-watch burst /dev/bx 1 "$b" $((gms * 1000)) $nr)
	idle-watch snap >/tmp/post
	if [ -n "$r" ]; then
		measure "burst kernel=$MODE idle=$IDLE shape=$shape gov=menu cus=50 spread=$BENCH_SPREAD burst=$b gap_ms=$gms bursts=$nr cfg=$cfg aa=$aa rep=$rep" \
			"$r$(cpu_shares)"
	else
		fail "bench-burst $shape $b $gms $cfg"
	fi
}

# A database beside fio (blkqos.bench_part=db, a guest of its own):
# SQLite (db-bench.c: 20,000 rows, a fixed mix of nine point reads to
# one synchronous update, 2,000 queries) on ext4 on a memory-backed bx,
# 50 us +/- the spread, both shapes, menu, every peer as an A/A pair,
# BENCH_LAT_REPS times. Each run makes the device, the file system and
# the table again, drops the page cache and then times the mix alone:
# most reads reach the device, every update flushes. No readahead, so a
# read is one page. Prints the rate, p50/p99/max of every query, the
# reads' and the updates' p99 (us), and where the CPUs' time went.
bench_db() {
	device_deep_off
	echo menu >$CPUIDLE/current_governor
	BX_EXTRA="memory_backed=1 size=256"
	mkdir -p /mnt/db
	for shape in local cross; do
		measure "benchpoint kernel=$MODE shape=$shape gov=menu db=sqlite uptime=$(cut -d' ' -f1 /proc/uptime)"
		pair_runs "$BENCH_LAT_REPS" 50 "$BENCH_SPREAD" "$shape" db_run $(bench_cfgs $shape)
	done
	BX_EXTRA=
}
db_run() {
	echo 0 >/sys/block/$BX/queue/read_ahead_kb
	# e2fsprogs' (run copies it), not busybox's, which has no ext4
	/usr/bin/mke2fs -q -t ext4 -F /dev/$BX >/dev/null || {
		fail "bench-db-mkfs $cfg"
		return
	}
	mount -t ext4 /dev/$BX /mnt/db || {
		fail "bench-db-mount $cfg"
		return
	}
	db-bench load /mnt/db/kv.db 20000 || fail "bench-db-load $cfg"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	idle-watch snap >/tmp/pre
	r=$(taskset -c "$SUB_CPU" db-bench run /mnt/db/kv.db 20000 2000)
	idle-watch snap >/tmp/post
	umount /mnt/db
	if [ -n "$r" ]; then
		measure "db kernel=$MODE idle=$IDLE dev=$BENCH_DEV shape=$shape gov=menu cus=50 spread=$BENCH_SPREAD cfg=$cfg aa=$aa rep=$rep" \
			"$r$(cpu_shares)"
	else
		fail "bench-db $shape $cfg"
	fi
}

# What each peer buys (latency) and keeps (where the CPUs' time goes,
# during the I/O and in the second after it), per shape, governor and
# completion time. The completion points of each shape come from
# blkqos.bench_cross= and blkqos.bench_local= (comma-separated us, "f"
# for a fixed delay, "none" for no point; default all five): a fixed
# delay shows what it lets the governors learn. blkqos.bench_govs= (menu,
# teo by default) lets one guest run one governor.
bench_cross() {
	device_deep_off
	govs=$(sed -n 's/.*blkqos\.bench_govs=\([a-z,]*\).*/\1/p' /proc/cmdline)
	for shape in cross local; do
		pts=$(sed -n "s/.*blkqos\.bench_$shape=\([0-9a-z,]*\).*/\1/p" /proc/cmdline)
		cfgs=$(bench_cfgs $shape)
		for g in $(echo "${govs:-menu,teo}" | tr , ' '); do
			echo $g >$CPUIDLE/current_governor
			for cus in $(echo "${pts:-20,50,100,200,50f}" | tr , ' '); do
				spread=$BENCH_SPREAD
				case $cus in
				none) continue ;;
				*f) cus=${cus%f} spread=0 ;;
				esac
				# QEMU's null-co has one latency, no spread
				[ "$BENCH_DEV" = null_blk ] || spread=0
				measure "benchpoint kernel=$MODE shape=$shape gov=$g cus=$cus spread=$spread uptime=$(cut -d' ' -f1 /proc/uptime)"
				bench_point $shape $g "$cus" "$spread" $cfgs
			done
		done
	done
	echo menu >$CPUIDLE/current_governor
}

expect idle-driver "$(cat $CPUIDLE/current_driver)" = blkqos_test
clock_cost() {
	f=/sys/kernel/debug/blkqos_test/clock_cost
	[ ! -r $f ] || measure "clock $(cat $f)"
}

# blkqos lease, the lease from user space, on the stock kernel
# (blkqos.mode=stock: the Debian tree with the test idle driver and
# cross-CPU null_blk, no series). The disk is the burst check's cross
# shape: CPU1 submits, the completion interrupt lands on CPU0 and comes
# back to CPU1 by IPI. The lease holds both CPUs (the disk's mq cpu_lists)
# through their pm_qos_resume_latency_us; CPU1 starts with an admin's
# 500 us, which must be back whenever no lease holds.
ULEASE_BURST="8 20000 5 pos"
ULEASE_ROUNDS=4
qos() { cat /sys/devices/system/cpu/cpu$1/power/pm_qos_resume_latency_us; }
qos_set() { echo "$2" >/sys/devices/system/cpu/cpu$1/power/pm_qos_resume_latency_us; }
qos_both() { echo "$(qos 0) $(qos 1)"; }
# context switches of a process: how often it woke
wakeups() { awk '/ctxt_switches/ { s += $2 } END { print s + 0 }' /proc/$1/status; }
# CPU time of a process, in microseconds (CONFIG_SCHEDSTATS)
cpu_us() { awk '{ print int($1 / 1000) }' /proc/$1/schedstat; }
# its user and system time, in clock ticks
ticks() { awk '{ print $14, $15 }' /proc/$1/stat; }
ulease_start() { # detect
	n0=$(grep -c "ul: CPUs 0-1 held at 10 us" /tmp/ulease.log)
	blkqos lease --detect "$1" /etc/blkqos/blkqos.toml 2>>/tmp/ulease.log &
	ul_pid=$!
	i=0
	while [ $i -lt 100 ] &&
		[ "$(grep -c "ul: CPUs 0-1 held at 10 us" /tmp/ulease.log)" = "$n0" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 100 ] || fail "ulease-start-$1 (no lease within 10 s)"
}
ulease_stop() {
	kill -TERM "$ul_pid"
	wait "$ul_pid"
}
# leading reads of each burst slower than $1 us: "median max" over bursts
paid_exits() { # threshold file
	awk -v t="$1" '
		$1 == 0 { if (NR > 1) c[n++] = k; k = 0; lead = 1 }
		{ if (lead && $2 > t) k++; else lead = 0 }
		END {
			c[n++] = k
			for (i = 0; i < n; i++)
				for (j = i + 1; j < n; j++)
					if (c[j] < c[i]) { x = c[i]; c[i] = c[j]; c[j] = x }
			print c[int((n - 1) / 2)], c[n - 1]
		}' "$2"
}
# "off": deep allowed, nothing holds; "floor": the deep state disabled;
# "static": apply's fallback, both CPUs held at 10 us for good; "tp" and
# "stat": blkqos lease seeing I/O through the tracepoint or the stat
ulease_cfg_on() { # cfg
	case $1 in
	floor) for c in 0 1; do echo 1 >/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable; done ;;
	static) qos_set 0 10; qos_set 1 10 ;;
	tp) ulease_start tracepoint ;;
	stat) ulease_start stat ;;
	esac
}
ulease_cfg_off() { # cfg
	case $1 in
	floor) for c in 0 1; do echo 0 >/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable; done ;;
	static) qos_set 0 0; qos_set 1 500 ;;
	tp | stat) ulease_stop ;;
	esac
}
# deep time of CPU0 and CPU1 (ms) over $1 seconds of sleep, and CPU0's
# deep entries
idle_deep() {
	local a0 a1 b0 b1
	a0=$(idle-snap 0)
	a1=$(idle-snap 1)
	sleep "$1"
	b0=$(idle-snap 0)
	b1=$(idle-snap 1)
	echo $(($(delta "$a0" "$b0" 6) / 1000)) $(($(delta "$a1" "$b1" 6) / 1000)) \
		$(delta "$a0" "$b0" 3)
}
# reads on ul from CPU1 for $1 seconds, in the background ($f)
ul_io() {
	fio --name=ul --filename=/dev/ul --rw=randread --bs=4k --direct=1 \
		--ioengine=psync --cpus_allowed=1 --time_based --runtime="$1" \
		--output-format=terse >/dev/null 2>&1 &
	f=$!
}
unit_state() { systemctl show -p "$1" --value blkqos-lease.service; }
unit_wait() { # property value [tenths of a second]
	i=0
	while [ $i -lt "${3:-100}" ] && [ "$(unit_state "$1")" != "$2" ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
# blkqos-lease.service from its file, under systemd: its ExecCondition lets
# it run on a kernel without the knobs, its sandbox leaves it the
# tracepoint, the CPUs' values and its state; after a SIGKILL its stop
# step puts every value back before the restart; a bad profile on reload
# is kept out
check_lease_unit() {
	expect "ulease-unit-under-systemd" -d /run/systemd/system
	[ -d /run/systemd/system ] || return
	systemctl start blkqos-lease.service
	unit_wait ActiveState active
	i=0
	while [ $i -lt 100 ] && ! grep -q "ul: CPUs 0-1 held at 10 us" /run/ulease-unit.log; do
		sleep 0.1
		i=$((i + 1))
	done
	expect "ulease-unit-starts $(unit_state ActiveState)/$(unit_state SubState)" \
		"$(unit_state SubState)" = running -a $i -lt 100
	expect "ulease-unit-sandbox-leaves-the-tracepoint" \
		-n "$(grep 'through the block:block_rq_issue tracepoint' /run/ulease-unit.log)"
	ul_io 2
	sleep 1
	held=$(qos_both)
	systemctl kill -s KILL blkqos-lease.service
	# stop-post runs ExecStopPost; auto-restart then waits RestartSec (1 s)
	# before the next start, whose own put-back must not be what is seen
	i=0
	while [ $i -lt 200 ] && [ "$(unit_state SubState)" != auto-restart ]; do
		sleep 0.02
		i=$((i + 1))
	done
	back=$(qos_both)
	sub=$(unit_state SubState)
	wait $f
	expect "ulease-unit-holds-during-io $held" "$held" = "10 10"
	expect "ulease-unit-stop-step-puts-back-after-sigkill $back ($sub)" \
		"$back" = "0 500" -a "$sub" = auto-restart
	unit_wait SubState running
	expect "ulease-unit-restarts-after-sigkill $(unit_state NRestarts)" \
		"$(unit_state SubState)" = running -a "$(unit_state NRestarts)" = 1
	echo 'cpu_lat_limit_us = [' >/etc/blkqos/blkqos.toml
	systemctl reload blkqos-lease.service
	sleep 1
	expect "ulease-unit-reload-keeps-the-old-profile $(unit_state SubState)" \
		"$(unit_state SubState)" = running \
		-a -n "$(grep 'keeping the profile read before' /run/ulease-unit.log)"
	cp /tmp/ul-good.toml /etc/blkqos/blkqos.toml
	systemctl stop blkqos-lease.service
	expect "ulease-unit-stop-puts-back $(qos_both)" "$(qos_both)" = "0 500" \
		-a -z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	sed 's/^/blkqos-lease.service: /' /run/ulease-unit.log | tail -n 20
}
# The Ansible role on the stock kernel, run by the guest on itself as on a
# managed host (connection local, ansible-core from the second archive):
# blkqos_lease=auto installs, enables and starts blkqos-lease.service,
# which holds the CPUs during I/O; a second run changes nothing;
# blkqos_state=restored stops and disables it with every value back.
role_run() { # name [ansible-playbook options]
	local name=$1 rc=0
	shift
	cat >/tmp/role.yml <<-'EOF2'
	- name: blkqos on this guest, as on a managed host
	  hosts: all
	  gather_facts: false
	  vars:
	    blkqos_binary_src: /usr/bin/blkqos
	    blkqos_binary: /usr/local/sbin/blkqos
	    blkqos_profile_src: /tmp/ul-good.toml
	  roles:
	    - role: blkqos.blkqos.blkqos
	EOF2
	HOME=/tmp LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 \
		ANSIBLE_COLLECTIONS_PATH=/usr/share/blkqos-ansible/collections \
		ansible-playbook -i localhost, -c local \
		-e ansible_python_interpreter=/usr/bin/python3 -vvvvv "$@" /tmp/role.yml \
		>/tmp/role-$name.log 2>&1 || rc=$?
	[ $rc = 0 ] || grep -a -v '^ *$' /tmp/role-$name.log | grep -a -i -A3 'looking for\|fatal\|error' |
		tail -n 60 | sed "s/^/role $name: /"
	recap=$(sed -n 's/^localhost *: //p' /tmp/role-$name.log | tr -s ' ')
	return $rc
}
check_lease_role() {
	[ -d /run/systemd/system ] || return
	mkdir -p /dev/shm
	grep -q ' /dev/shm ' /proc/mounts || mount -t tmpfs shm /dev/shm
	# what the unit's checks left: stopped, disabled, the harness's file
	systemctl stop blkqos-lease.service
	systemctl disable blkqos-lease.service >/dev/null 2>&1
	expect "ulease-role-unit-stopped-before $(unit_state ActiveState)" \
		"$(unit_state ActiveState)" = inactive
	: >/run/ulease-unit.log
	s0=$(date +%s)
	role_run present
	rc=$?
	measure "ulease-role run=present guest_secs=$(($(date +%s) - s0)) $recap"
	expect "ulease-role-runs rc=$rc" $rc = 0
	unit_wait ActiveState active
	pid=$(unit_state MainPID)
	exe=$(readlink /proc/$pid/exe)
	expect "ulease-role-starts-the-unit $(systemctl is-enabled blkqos-lease.service) $(unit_state SubState) $exe" \
		"$(systemctl is-enabled blkqos-lease.service)" = enabled \
		-a "$(unit_state SubState)" = running -a "$exe" = /usr/local/sbin/blkqos
	i=0
	while [ $i -lt 100 ] && ! grep -q "ul: CPUs 0-1 held at 10 us" /run/ulease-unit.log; do
		sleep 0.1
		i=$((i + 1))
	done
	ul_io 2
	sleep 1
	held=$(qos_both)
	wait $f
	sleep 0.5
	expect "ulease-role-unit-holds-during-io $held then $(qos_both)" \
		$i -lt 100 -a "$held" = "10 10" -a "$(qos_both)" = "0 500"
	role_run again
	rc=$?
	expect "ulease-role-second-run-changes-nothing rc=$rc $recap" \
		$rc = 0 -a -n "$(echo "$recap" | grep ' changed=0 .* failed=0 ')" \
		-a "$(unit_state MainPID)" = "$pid"
	role_run restored -e blkqos_state=restored
	rc=$?
	ul_io 1
	sleep 0.5
	during=$(qos_both)
	wait $f
	expect "ulease-role-restored-stops-the-unit rc=$rc $(systemctl is-enabled blkqos-lease.service) $(unit_state ActiveState) $during" \
		$rc = 0 -a "$(systemctl is-enabled blkqos-lease.service)" = disabled \
		-a "$(unit_state ActiveState)" = inactive -a "$during" = "0 500" \
		-a -f /run/blkqos/state.json \
		-a -z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	sed 's/^/blkqos-lease.service (role): /' /run/ulease-unit.log | tail -n 10
	# the same play on a kernel with the knobs (a fake tree that has
	# them, which the unit's ExecCondition reads too: not in its private
	# /tmp): the unit is
	# enabled for a later boot but not started, and a second run
	# changes nothing
	mkfixture /run/knobsys zoo queue >/dev/null
	role_run knobs -e blkqos_sysfs=/run/knobsys -e blkqos_state_dir=/run/blkqos-knobs
	rc=$?
	role_run knobs-again -e blkqos_sysfs=/run/knobsys -e blkqos_state_dir=/run/blkqos-knobs
	rc2=$?
	expect "ulease-role-kernel-lease-enables-without-starting rc=$rc,$rc2 $(systemctl is-enabled blkqos-lease.service) $(unit_state ActiveState) $recap" \
		$rc = 0 -a $rc2 = 0 -a "$(systemctl is-enabled blkqos-lease.service)" = enabled \
		-a "$(unit_state ActiveState)" = inactive \
		-a -n "$(echo "$recap" | grep ' changed=0 .* failed=0 ')"
}
check_user_lease() {
	mknull ul queue_mode=2 irqmode=2 completion_nsec=200000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 || fail setup-ul
	echo 2 >/sys/block/ul/queue/rq_affinity
	expect "ulease-stock-kernel-has-no-knobs" ! -e /sys/block/ul/queue/cpu_lat_limit_us \
		-a ! -e /sys/devices/system/cpu/cpu0/cpuidle/cpu_lat_lease
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF2
	[[rule]]
	name = "ul"
	match = { name = "ul*" }
	cpu_lat_limit_us = 10
	cpu_lat_timeout_ms = 3
	EOF2
	cp /etc/blkqos/blkqos.toml /tmp/ul-good.toml
	qos_set 1 500
	# udevd with the project's rule runs beside the lease, as installed
	start_udevd ulease-udevd-start
	: >/tmp/ulease.log

	# with the disk idle: the admin's value stays, the process sleeps
	# and both CPUs' deep time is what it is with no process at all
	set -- $(idle_deep 10)
	off_deep="$1 $2"
	ulease_start auto
	expect "ulease-auto-picks-tracepoint" -n "$(grep 'through the block:block_rq_issue tracepoint' /tmp/ulease.log)"
	w0=$(wakeups $ul_pid)
	u0=$(cpu_us $ul_pid)
	set -- $(idle_deep 10)
	w1=$(wakeups $ul_pid)
	u1=$(cpu_us $ul_pid)
	measure "ulease-idle secs=10 wakeups=$((w1 - w0)) cpu_us=$((u1 - u0)) cpu0_deep_entries=$3 deep_ms=$1,$2 off_deep_ms=${off_deep% *},${off_deep#* }"
	expect "ulease-idle-does-not-wake wakeups=$((w1 - w0))" $((w1 - w0)) -le 2
	expect "ulease-idle-deep-as-without-it deep_ms=$(($1 + $2)) off=$((${off_deep% *} + ${off_deep#* }))" \
		$((($1 + $2) * 100)) -ge $(((${off_deep% *} + ${off_deep#* }) * 99))
	expect "ulease-idle-leaves-the-originals $(qos_both)" "$(qos_both)" = "0 500"

	# during I/O both CPUs are held; after it, the originals come back
	ul_io 2
	sleep 1
	held=$(qos_both)
	# status and metrics show it, the mechanism named
	st=$(blkqos status --json 2>/dev/null | tr -d ' \n' |
		grep -o '"user_lease":{"mechanism":"blkqoslease","pid":[0-9]*,"detect":"tracepoint","held":true,"limit_us":10,"timeout_ms":3' |
		wc -l)
	mt=$(blkqos metrics 2>/dev/null | grep -c '^blkqos_cpu_user_lease_held{cpu="[01]"} 1$')
	# someone else writes CPU0's value while the lease holds it
	qos_set 0 20
	wait $f
	sleep 0.1
	expect "ulease-holds-both-cpus-during-io $held" "$held" = "10 10"
	expect "ulease-status-and-metrics-show-it status=$st metrics=$mt" "$st" = 2 -a "$mt" = 2
	expect "ulease-lapse-puts-back-and-keeps-a-later-value $(qos_both)" "$(qos_both)" = "20 500"
	expect "ulease-reports-a-value-changed-under-it" \
		-n "$(grep 'cpu0: pm_qos_resume_latency_us was changed to "20" by someone else' /tmp/ulease.log)"
	qos_set 0 0

	# a disk that comes and goes, through udev
	mknull ul2 queue_mode=2 irqmode=0 submit_queues=2 || fail setup-ul2
	udevadm settle -t 30
	sleep 0.5
	expect "ulease-follows-a-new-disk" -n "$(grep 'ul2: CPUs 0-1 held at 10 us' /tmp/ulease.log)"
	rmnull ul2
	udevadm settle -t 30
	sleep 0.5
	expect "ulease-follows-a-removed-disk" -n "$(grep 'ul2: no longer leased' /tmp/ulease.log)"

	# SIGHUP with a bad profile keeps the one read before
	echo 'cpu_lat_limit_us = [' >/etc/blkqos/blkqos.toml
	kill -HUP $ul_pid
	sleep 0.5
	expect "ulease-bad-profile-on-sighup-keeps-the-old" -d /proc/$ul_pid \
		-a -n "$(grep 'keeping the profile read before' /tmp/ulease.log)"
	cp /tmp/ul-good.toml /etc/blkqos/blkqos.toml
	ulease_stop
	expect "ulease-sigterm-puts-back $(qos_both)" "$(qos_both)" = "0 500"

	# SIGKILL while the lease holds: the values stay until the unit's
	# stop step (ExecStopPost) or the next start puts them back
	for next in stop-step start; do
		ulease_start tracepoint
		ul_io 2
		sleep 1
		kill -KILL $ul_pid
		wait $ul_pid 2>/dev/null
		wait $f
		expect "ulease-sigkill-leaves-cpus-held-$next $(qos_both)" "$(qos_both)" = "10 10"
		if [ $next = stop-step ]; then
			blkqos lease --put-back /etc/blkqos/blkqos.toml 2>>/tmp/ulease.log
			expect "ulease-stop-step-puts-back $(qos_both)" $? = 0 -a "$(qos_both)" = "0 500"
		else
			ulease_start tracepoint
			expect "ulease-next-start-puts-back $(qos_both)" "$(qos_both)" = "0 500"
			ulease_stop
		fi
		expect "ulease-state-has-no-leases-left-$next" \
			-z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	done

	# a CPU that comes online after the start gets its events: CPU1
	# offline at the start, online again, its I/O starts the lease
	echo 0 >/sys/devices/system/cpu/cpu1/online
	ulease_start tracepoint
	echo 1 >/sys/devices/system/cpu/cpu1/online
	udevadm settle -t 30
	sleep 0.5
	ul_io 1
	sleep 0.5
	held=$(qos_both)
	wait $f
	ulease_stop
	expect "ulease-cpu-online-later-is-watched $held" "$held" = "10 10"

	check_lease_unit

	# bursts after idle gaps, the configurations in turns
	for cfg in off floor static tp stat; do
		rm -f /tmp/ub-$cfg /tmp/ub-use-$cfg
	done
	for round in $(seq $ULEASE_ROUNDS); do
		for cfg in off floor static tp stat; do
			ulease_cfg_on $cfg
			pre=$(idle-snap 0)
			pre1=$(idle-snap 1)
			c0=0 u0=0
			[ $cfg != tp -a $cfg != stat ] || { c0=$(wakeups $ul_pid); u0=$(cpu_us $ul_pid); }
			idle-watch burst /dev/ul 1 $ULEASE_BURST >>/tmp/ub-$cfg
			c1=0 u1=0
			[ $cfg != tp -a $cfg != stat ] || { c1=$(wakeups $ul_pid); u1=$(cpu_us $ul_pid); }
			post=$(idle-snap 0)
			post1=$(idle-snap 1)
			# deep entries and deep time (us), idle time, on CPU0 and
			# CPU1; the process's wake-ups and CPU time
			echo $(delta "$pre" "$post" 3) $(delta "$pre" "$post" 6) \
				$(($(delta "$pre" "$post" 4) + $(delta "$pre" "$post" 5) + $(delta "$pre" "$post" 6))) \
				$(delta "$pre1" "$post1" 3) $(delta "$pre1" "$post1" 6) \
				$(($(delta "$pre1" "$post1" 4) + $(delta "$pre1" "$post1" 5) + $(delta "$pre1" "$post1" 6))) \
				$((c1 - c0)) $((u1 - u0)) >>/tmp/ub-use-$cfg
			ulease_cfg_off $cfg
			[ "$(qos_both)" = "0 500" ] || fail "ulease-burst-$cfg-puts-back $(qos_both)"
		done
	done
	floor_rest=$(awk '$1 > 0 { print $2 }' /tmp/ub-floor | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	for cfg in off floor static tp stat; do
		awk '$1 == 0 { print "first", $2 } $1 > 0 { print "rest", $2 }' /tmp/ub-$cfg >/tmp/ub-raw
		r=$(burst_summary /tmp/ub-raw)
		set -- $(paid_exits $((floor_rest + 75)) /tmp/ub-$cfg)
		paid="paid_exit_p50=$1 paid_exit_max=$2"
		eval "paidmax_$cfg=$2"
		set -- $(awk '{ for (i = 1; i <= NF; i++) s[i] += $i }
			END { for (i = 1; i <= 8; i++) printf "%d ", s[i] }' /tmp/ub-use-$cfg)
		measure "ulease-burst cfg=$cfg cpu0_deep=$1 cpu0_deep_pct=$(($2 * 100 / ($3 + 1))) cpu1_deep=$4 cpu1_deep_pct=$(($5 * 100 / ($6 + 1))) wakeups=$7 cpu_us=$8 $paid $r"
		eval "p90_$cfg=$(echo "$r" | sed -n 's/.*first_p90=\([0-9]*\).*/\1/p')"
		eval "rest90_$cfg=$(echo "$r" | sed -n 's/.*rest_p90=\([0-9]*\).*/\1/p')"
		eval "deep_$cfg=$1"
	done
	# the lease lets both CPUs sleep deep between bursts, and holds them
	# from the second read of a burst on at the latest (a resume latency
	# write does not wake a CPU already deep: the first read pays); the
	# rest of a burst pays no exit (half of one: 75 us)
	# nothing holding, the reads of a burst pay the exit: else the model
	# hides what the checks are about
	expect "ulease-burst-off-pays-exit first_p90=${p90_off}us floor=${p90_floor}us paid_exit_max=$paidmax_off" \
		"${p90_off:-0}" -ge $((${p90_floor:-0} + 100)) -a "${paidmax_off:-0}" -ge 2
	expect "ulease-burst-deep-between-bursts cpu0_deep=$deep_tp" "${deep_tp:-0}" -ge 10
	expect "ulease-burst-rest-held rest_p90=${rest90_tp}us floor=${rest90_floor}us" \
		"${rest90_tp:-999999}" -le $((${rest90_floor:-0} + 75))
	expect "ulease-burst-at-most-two-reads-pay paid_exit_max=$paidmax_tp" "${paidmax_tp:-9}" -le 2

	# sustained I/O at 200 and 50 us completions: p99 against deep
	# disabled
	mknull ul5 queue_mode=2 irqmode=2 completion_nsec=50000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 || fail setup-ul5
	echo 2 >/sys/block/ul5/queue/rq_affinity
	for d in ul ul5; do
		p99_floor= p99_tp= p99_off=
		for cfg in floor tp floor tp off; do
			ulease_cfg_on $cfg
			set -- $(fio_qd1 $d 2000)
			ulease_cfg_off $cfg
			measure "ulease-sustained dev=$d cfg=$cfg iops=$1 clat_mean_us=$2 p99_us=$3 max_us=$4"
			eval "p99_$cfg=\"\${p99_$cfg:-} $3\""
		done
		# held throughout: no exit at the p99 (half of one: 75 us).
		# The issue's 1.05x is not always met: the process's looks
		# (twice a timeout) run on the I/O CPUs; the ratio is in the
		# figures. At 50 us the governor keeps even "off" shallow
		# for the most part.
		p99_off=${p99_off# }
		[ $d != ul ] || expect "ulease-sustained-off-pays-exit p99=${p99_off}us" "${p99_off:-0}" -ge 300
		set -- $p99_floor $p99_tp
		measure "ulease-sustained-p99-ratio-pct dev=$d $(($3 * 100 / $1)) $(($4 * 100 / $2)) off=$((p99_off * 100 / $1))"
		expect "ulease-sustained-p99-no-exit-$d floor=$1,$2 tp=$3,$4" \
			"$3" -le $(($1 + 75)) -a "$4" -le $(($2 + 75))
	done
	rmnull ul5

	# what the process costs the I/O path and itself, on a disk that
	# completes at once: the static hold against the lease (the
	# tracepoint's events disabled while it holds, its stat read twice a
	# timeout)
	mknull ulh queue_mode=2 irqmode=0 submit_queues=2 || fail setup-ulh
	for cfg in static tp stat static tp stat; do
		ulease_cfg_on $cfg
		u0=0 w0=0 t0="0 0"
		[ $cfg = static ] || { u0=$(cpu_us $ul_pid); w0=$(wakeups $ul_pid); t0=$(ticks $ul_pid); }
		set -- $(fio_qd1 ulh 20000)
		u1=0 w1=0 t1="0 0"
		[ $cfg = static ] || { u1=$(cpu_us $ul_pid); w1=$(wakeups $ul_pid); t1=$(ticks $ul_pid); }
		ulease_cfg_off $cfg
		measure "ulease-hot cfg=$cfg iops=$1 clat_mean_us=$2 p99_us=$3 cpu_us=$((u1 - u0)) wakeups=$((w1 - w0)) utime_stime_ticks=$(echo $t0 $t1 | awk '{ print $3 - $1 "," $4 - $2 }')"
	done
	check_lease_role
	rmnull ulh
	rmnull ul
	grep -q . /tmp/ulease.log && sed 's/^/blkqos lease: /' /tmp/ulease.log | tail -n 40
}

# the real NVMe topology (QEMU-emulated controllers, multipath, md, dm)
[ ! -r /etc/guest-nvme.sh ] || . /etc/guest-nvme.sh
# blkqos.only=NAME: one family of checks, then the end marker
only() {
	"$@"
	echo BLKQOS-DONE
	reboot -f
}
bfix_checks() {
	check_knob_files
	check_auto_not_poll
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

race_checks() {
	mknull nb0 queue_mode=2 irqmode=2 completion_nsec=$SLOW_NS \
		submit_queues=2 || fail setup-nullb-mq
	check_knob_race
}
# The cost of going idle with no lease taken: 20000 sleeps of 200 us on
# CPU1, each an idle entry, exit and timer wake-up; how much longer than
# asked they take, against the kernel without the option.
idle_entry() {
	measure "idleentry variant=$MODE $(idle-watch sleeps 1 20000 200)"
}

hotpath_checks() {
	clock_cost
	idle_entry
	hot_path 0
	hot_path 1
}
bench_checks() {
	# without its switch the PSD kernel's baseline would be PSD again
	[ "$MODE" != psdmodel ] || [ -e $PSD_ON ] || fail "bench-psd-switch $PSD_ON"
	# blkqos.bench_part=bursts: a guest of its own runs the bursts
	if grep -q 'blkqos\.bench_part=bursts' /proc/cmdline; then
		bench_bursts
		return
	fi
	if grep -q 'blkqos\.bench_part=db' /proc/cmdline; then
		bench_db
		return
	fi
	# blkqos.bench_hotpath=0: a second guest of the same kernel, which
	# runs the other shape, does not measure the hot path again
	grep -q 'blkqos\.bench_hotpath=0' /proc/cmdline || {
		hot_path 0
		hot_path 1
	}
	[ "$MODE" = nopsd ] || bench_cross
}
case $ONLY in
nvme) only check_nvme ;;
storm) only check_udev_storm ;;
lease) only check_lease_trace ;;
bfix) only bfix_checks ;;
race) only race_checks ;;
lapse) only lapse_checks ;;
burst) only burst_checks ;;
tick) only check_tick ;;
kunit) only check_kunit_modules ;;
renewals) only check_renewals ;;
ulease) only check_user_lease ;;
hotpath) only hotpath_checks ;;
bench) only bench_checks ;;
esac
check_knob_files
if [ "$MODE" = psd ]; then
	clock_cost
	check_kunit_modules
	for g in menu teo ladder; do
		check_governor $g
	done
	check_auto_not_poll
	lapse_checks
	burst_checks
	check_lease_trace
	check_strict_then_loose
	check_renewals
	check_menu_poll_override
	echo menu >$CPUIDLE/current_governor
	check_hotplug
	check_blkqos
	check_udevd
	check_nvme
	check_stress
fi
hot_path
rmnull nb0
echo BLKQOS-DONE
reboot -f
