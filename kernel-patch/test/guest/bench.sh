# Sourced by the guest's /init (guest-init.sh). Measurements: the hot path, the benchmark's peers, shapes, bursts and
# database, the clock's cost, idle entry.

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
# " deepN_pct= spinN_pct= c1_N_pct= pollN_pct=" per CPU N, per cent; the
# spin is every exit latency paid (the deepest state's and C1E's)
cpu_shares() {
	paste -d' ' /tmp/pre /tmp/post | awk '{
		c = NR - 1; pct = 100000 / ($13 - $6); spin = $5 * ($11 - $4)
		printf " deep%d_pct=%.1f spin%d_pct=%.1f c1_%d_pct=%.1f poll%d_pct=%.1f",
			c, ($10 - $3 - spin) * pct, c, (spin + $14 - $7) * pct, c,
			($9 - $2) * pct, c, ($8 - $1) * pct }'
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
#   psd_cpu0_floor  the same with the deep state off on the CPU that
#             takes the interrupt in the cross shape (CPU0 on null_blk,
#             the vector's CPU on QEMU's NVMe; the name is the first's)
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
		echo 1 >/sys/devices/system/cpu/cpu${IRQ_CPU:-0}/cpuidle/$DEEP/disable ;;
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

# The shapes a bursts or database guest runs (blkqos.bench_shapes=local,
# cross, or one of them: a guest per shape keeps each short enough to
# finish in a work session)
bench_shapes() {
	sh=$(sed -n 's/.*blkqos\.bench_shapes=\([a-z,]*\).*/\1/p' /proc/cmdline)
	echo "${sh:-local,cross}" | tr , ' '
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
	for shape in $(bench_shapes); do
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
	for shape in $(bench_shapes); do
		measure "benchpoint kernel=$MODE shape=$shape gov=menu db=sqlite uptime=$(cut -d' ' -f1 /proc/uptime)"
		pair_runs "$BENCH_LAT_REPS" 50 "$BENCH_SPREAD" "$shape" db_run $(bench_cfgs $shape)
	done
	BX_EXTRA=
}
db_run() {
	r=
	db_run_body
	[ -z "$r" ] || measure "db kernel=$MODE idle=$IDLE dev=$BENCH_DEV shape=$shape gov=menu cus=50 spread=$BENCH_SPREAD cfg=$cfg aa=$aa rep=$rep" \
		"$r$(cpu_shares)"
}
# one database run: r= its figures, empty after a failure (reported)
db_run_body() {
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
	[ -n "$r" ] || fail "bench-db $shape $cfg"
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

clock_cost() {
	f=/sys/kernel/debug/blkqos_test/clock_cost
	[ ! -r $f ] || measure "clock $(cat $f)"
}

# The cost of going idle with no lease taken: 20000 sleeps of 200 us on
# CPU1, each an idle entry, exit and timer wake-up; how much longer than
# asked they take, against the kernel without the option.
idle_entry() {
	measure "idleentry variant=$MODE $(idle-watch sleeps 1 20000 200)"
}

# ---- v4 (bench/v4.py): the peers named for what they are, each run a run
# (no A/A pairs: the runs of a peer are its sample), exact latencies.
#
# The peers: deep (nothing set), c1e (states deeper than C1E off on the
# I/O CPUs: what "cpupower idle-set -D" users on Intel call C-states off),
# c1 (states deeper than C1 off: the floor every ratio is taken against),
# dma (/dev/cpu_dma_latency at C1's exit latency), static (the per-CPU
# resume latency at C1's), knob10 and auto (this series, 3 ms), ulease
# (blkqos lease on the stock kernel), psd (the PSD model). The device's
# CPU has POLL and C1 only in every peer, so that no peer changes it
# (cpu_dma_latency is global and would otherwise take C1E from it).
V4_KERNEL=$MODE
case $MODE in
psd) V4_KERNEL=lease ;;
nopsd) V4_KERNEL=nolease ;;
esac
v4_arg() { sed -n "s/.*blkqos\.v4_$1=\([0-9a-z:,.-]*\).*/\1/p" /proc/cmdline; }

# every cpuidle state from index FROM on, disable set to VALUE, on CPUS
states_set() { # value from cpu...
	ss_v=$1 ss_from=$2
	shift 2
	for c in "$@"; do
		for s in /sys/devices/system/cpu/cpu$c/cpuidle/state*; do
			[ "${s##*state}" -ge "$ss_from" ] || continue
			echo "$ss_v" >"$s/disable"
		done
	done
}
# the index of the state named NAME (on CPU0), empty if none
state_index() { # name
	for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
		[ "$(cat "$s/name")" != "$1" ] || echo "${s##*state}"
	done
}
# whether CPU2 (the device) has POLL and C1 and nothing else, no resume
# latency of its own and no lease (dma's global C1 limit leaves it the
# same two states): what every peer must leave it. That it never entered
# a deeper state during the runs, bench/v4.py checks from their records
# (spin2 and deep2 at 0).
v4_device_cpu_ok() {
	[ "$BENCH_DEV" = null_blk ] || return 0
	d=/sys/devices/system/cpu/cpu$DEV_CPU
	for s in $d/cpuidle/state*; do
		[ "${s##*state}" -lt 2 ] || [ "$(cat "$s/disable")" = 1 ] || return 1
		[ "${s##*state}" -ge 2 ] || [ "$(cat "$s/disable")" = 0 ] || return 1
	done
	[ "$(cat $d/power/pm_qos_resume_latency_us)" = 0 ] || return 1
	[ ! -r $d/cpuidle/cpu_lat_lease_limit_us ] ||
		[ "$(cat $d/cpuidle/cpu_lat_lease_limit_us)" = -1 ] || return 1
}
v4_peer_off() {
	states_set 0 1 $IO_CPUS
	peer_off
}
v4_peer_on() { # cfg
	v4_peer_off
	case $1 in
	deep) ;;
	c1e)
		i=$(state_index C1E)
		[ -n "$i" ] || {
			fail "bench-v4-no-c1e $IDLE"
			return 1
		}
		states_set 1 $((i + 1)) $IO_CPUS ;;
	c1) states_set 1 2 $IO_CPUS ;;
	dma)
		exec 7>/dev/cpu_dma_latency
		printf '%x' "$C1_EXIT_US" >&7 ;;
	static)
		for c in $IO_CPUS; do
			echo "$C1_EXIT_US" >/sys/devices/system/cpu/cpu$c/power/pm_qos_resume_latency_us
		done ;;
	psd) echo 1 >$PSD_ON ;;
	knob10) echo 10 >"$(knob $BX limit_us)" ;;
	auto) echo auto >"$(knob $BX limit_us)" ;;
	ulease) bench_lease ;;
	*)
		fail "bench-v4-peer $1"
		return 1 ;;
	esac
	sleep 0.05	# let a lease from the previous configuration lapse
	g=$(cat $CPUIDLE/current_governor)
	echo ladder >$CPUIDLE/current_governor
	echo "$g" >$CPUIDLE/current_governor
	v4_device_cpu_ok || {
		fail "bench-v4-device-cpu $1"
		return 1
	}
}

# The exact completion latency (clat) of every I/O of the last fio_v4, from
# fio's latency log (ns): "n= mean_ns= p50_ns= p99_ns= p999_ns= max_ns=" by
# nearest rank, and h= a histogram in 100 ns bins, "gap:count" pairs where
# gap is the bin's distance from the previous one listed (the first from 0)
v4_lat_stats() { # log
	cut -d, -f2 "$1" | tr -d ' ' | sort -n | awk '
	{ v[NR] = $1; s += $1; b = int($1 / 100); h[b]++; if (!(b in seen)) { seen[b] = 1; o[++nb] = b } }
	function r(p) { k = int((NR * p + 999) / 1000); if (k < 1) k = 1; return v[k] }
	END {
		printf "n=%d mean_ns=%d p50_ns=%d p99_ns=%d p999_ns=%d max_ns=%d h=", NR, s / NR, r(500), r(990), r(999), v[NR]
		prev = 0
		for (i = 1; i <= nb; i++) { printf "%s%d:%d", (i > 1 ? "," : ""), o[i] - prev, h[o[i]]; prev = o[i] }
		printf "\n"
	}'
}
# The record of one run in /tmp/v4rec (failures on the console: never
# inside a record); status 1 if there is none
fio_v4() { # dev iodepth nr_ios
	rm -f /tmp/pre /tmp/post /tmp/fio.out /tmp/v4lat_clat.log /tmp/v4lat_clat.1.log /tmp/v4rec
	fio --name=lat --filename="/dev/$1" --rw=randread --bs=4k \
		--ioengine=libaio --iodepth="$2" --direct=1 --number_ios="$3" \
		--size=64m --cpus_allowed="$SUB_CPU" --norandommap --randrepeat=1 \
		--output-format=terse --terse-version=3 \
		--write_lat_log=/tmp/v4lat --log_avg_msec=0 --per_job_logs=0 \
		--exec_prerun="sh -c 'idle-watch snap >/tmp/pre'" \
		--exec_postrun="sh -c 'idle-watch snap >/tmp/post'" \
		2>/tmp/fio.err >/tmp/fio.out
	[ -s /tmp/pre ] && [ -s /tmp/post ] || fail "idle-watch-snap $1 qd$2"
	l=/tmp/v4lat_clat.log
	[ -s $l ] || l=/tmp/v4lat_clat.1.log
	[ -s $l ] || {
		sed 's/^/fio: /' /tmp/fio.err >&2
		fail "bench-v4-latlog $1 qd$2"
		return 1
	}
	[ "$(wc -l <$l)" = "$3" ] || {
		fail "bench-v4-latlog-count $1 qd$2 $(wc -l <$l) $3"
		return 1
	}
	# fio's own clat mean (us) beside the log's: bench/v4.py checks the
	# log's unit with it
	printf 'iops=%s fio_clat_mean_us=%s %s%s\n' \
		"$(awk -F';' '$1 == 3 { print $8 }' /tmp/fio.out)" \
		"$(awk -F';' '$1 == 3 { print $16 }' /tmp/fio.out)" \
		"$(v4_lat_stats $l)" "$(cpu_shares)" >/tmp/v4rec
}

# the words shuffled, seeded by $1: the same order for the same seed, a
# different one for each run (busybox awk: srand(seed) repeats)
shuffle() { # seed word...
	sh_seed=$1
	shift
	echo "$@" | awk -v seed="$sh_seed" '{
		srand(seed)
		for (i = NF; i > 1; i--) { j = int(rand() * i) + 1; t = $i; $i = $j; $j = t }
		print }'
}

# The runs of the peers blkqos.v4_cfgs=cfg:FIRST-LAST,... names: run r of
# every peer whose range holds r, in an order shuffled by r (no peer
# always first after the boot or always after the same one), each on a
# device made again with its peer set up; BODY runs with cfg and rep set.
v4_runs() { # cus spread shape body
	vr_reps=$(v4_arg cfgs | tr , '\n' | sed 's/.*[:-]//' | sort -n | tail -1)
	rep=$(v4_arg cfgs | tr , '\n' | sed 's/.*:\([0-9]*\)-.*/\1/' | sort -n | head -1)
	while [ "$rep" -le "$vr_reps" ]; do
		cfgs=
		for cr in $(v4_arg cfgs | tr , ' '); do
			lo=${cr#*:} hi=${cr#*-}
			lo=${lo%-*}
			[ "$rep" -lt "$lo" ] || [ "$rep" -gt "$hi" ] || cfgs="$cfgs ${cr%%:*}"
		done
		for cfg in $(shuffle "$rep" $cfgs); do
			bx_up "$1" "$2" "$3" || continue
			if v4_peer_on "$cfg"; then
				$4
			fi
			v4_peer_off
			bx_down
		done
		rep=$((rep + 1))
	done
}
v4_tags() {
	echo "kernel=$V4_KERNEL idle=$IDLE build=$(v4_arg build) dev=$BENCH_DEV irq_cpu=${IRQ_CPU:--1} sub_cpu=$SUB_CPU shape=$shape gov=menu cus=$cus spread=$spread cfg=$cfg rep=$rep"
}
v4_lat_run() {
	for qd in $(v4_arg qds | tr , ' '); do
		fio_v4 "$BX" "$qd" "$BENCH_IOS" || continue
		measure "v4lat $(v4_tags) qd=$qd ios=$BENCH_IOS" "$(cat /tmp/v4rec)"
	done
}
v4_burst_run() {
	idle-watch snap >/tmp/pre
	r=$(idle-watch burst /dev/bx 1 "$b" $((gms * 1000)) "$nr" v4)
	idle-watch snap >/tmp/post
	if [ -n "$r" ]; then
		measure "v4burst $(v4_tags) burst=$b gap_ms=$gms bursts=$nr" "$r$(cpu_shares)"
	else
		fail "bench-v4-burst $shape $b $gms $cfg"
	fi
}
v4_db_run() {
	r=
	db_run_body
	[ -z "$r" ] || measure "v4db $(v4_tags)" "$r$(cpu_shares)"
}

# One v4 guest: a kind (lat, burst, db) at one point; what it runs comes
# from blkqos.v4_*= (bench/v4.py writes them), records tagged as v4 rows
bench_v4() {
	[ "$BENCH_DEV" != null_blk ] || states_set 1 2 $DEV_CPU
	echo menu >$CPUIDLE/current_governor
	shape=$(v4_arg shape) cus=$(v4_arg cus) spread=$BENCH_SPREAD
	[ "$BENCH_DEV" = null_blk ] || spread=0
	measure "benchpoint kernel=$V4_KERNEL v4=$(v4_arg kind) shape=$shape uptime=$(cut -d' ' -f1 /proc/uptime)"
	# the first runs of a boot are slower: one of each kind thrown away
	bx_up "$cus" "$spread" "$shape"
	fio_v4 "$BX" 1 2000 || true
	[ "$(v4_arg kind)" != burst ] || idle-watch burst /dev/$BX 1 "$(v4_arg burst)" 2000 20 >/dev/null
	bx_down
	case $(v4_arg kind) in
	lat) v4_runs "$cus" "$spread" "$shape" v4_lat_run ;;
	burst)
		b=$(v4_arg burst) nr=$(v4_arg bursts)
		for gms in $(v4_arg gaps | tr , ' '); do
			v4_runs "$cus" "$spread" "$shape" v4_burst_run
		done ;;
	db)
		BX_EXTRA="memory_backed=1 size=256"
		mkdir -p /mnt/db
		v4_runs "$cus" "$spread" "$shape" v4_db_run
		BX_EXTRA= ;;
	*) fail "bench-v4-kind $(v4_arg kind)" ;;
	esac
}
