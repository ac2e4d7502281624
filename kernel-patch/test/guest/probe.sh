# Sourced by the guest's /init (guest-init.sh). blkqos probe on a 50 us
# null_blk disk (blkqos.only=probe): what it measures on the test idle
# driver's tables (blkqos_test.idle=), and that it leaves the machine as it
# found it. On the lease kernel (blkqos.mode=psd) it holds the CPUs through
# the disk's queue knobs, on the stock kernel (blkqos.mode=stock) through
# blkqos lease, a child writing the CPUs' pm_qos_resume_latency_us.

# Guest seconds the probe is asked for (--duration). Its floor is 5
# rounds of 8 runs (deep, c1, lease@auto, lease@0, twice each) of 0.2 s,
# each after 0.1 s of warm-up: about 12 s whatever is asked, and 80
# first reads of bursts per configuration, whose p90's interval then
# spans 20 % and more. 20 s gives 0.5 s runs and about twice the bursts,
# in about 25 guest seconds: a busy guest second costs about ten host
# seconds under -icount, and the boot stays a few host minutes.
PROBE_SECS=20
# The lease's timeout (--timeout, ms). The default, 3 ms, lapses in the
# bursts' 8 and 32 ms gaps, and the first read of the next burst pays the
# deep exit on every limit (icx, lease kernel: first-of-burst p90 2.4
# times c1's at limit 4 and at 0): no limit then gets within 5 % of c1 and
# the answer is never a limit, whatever the limit does. Under -icount the
# vCPUs also run in turn, so that a 3 ms lease lapses between reads a real
# CPU would not see apart (guest/lease.sh: 200 ms for the same reason).
# 200 ms outlasts every gap: what the probe compares is the limit.
PROBE_TIMEOUT_MS=200
PROBE_STATE=/run/blkqos

# The JSON document (serde's pretty printing: one value per line) as
# "path value" lines, path the keys and array indexes joined by dots
# (devices.0.analysis.configs.1.qd1.p99_us 57.3), strings unquoted; the
# last line is "json-end DEPTH" (0: every bracket closed). The guest has
# no jq or Python, only busybox awk.
json_flat() { # file
	awk '
	function at(key,   i, p) {
		p = ""
		for (i = 2; i <= d; i++)
			p = p k[i] "."
		return p key
	}
	{
		sub(/\r$/, "")
		sub(/^[ \t]+/, "")
		if ($0 ~ /^[]}],?$/) {
			d--
			next
		}
		key = ""
		if (match($0, /^"[^"]*": /)) {
			key = substr($0, 2, RLENGTH - 4)
			$0 = substr($0, RLENGTH + 1)
		} else if (d > 0 && arr[d]) {
			key = n[d]++
		}
		v = $0
		sub(/,$/, "", v)
		if (v == "{" || v == "[") {
			k[++d] = key
			arr[d] = v == "["
			n[d] = 0
			seen = 1
			next
		}
		if (v ~ /^".*"$/)
			v = substr(v, 2, length(v) - 2)
		print at(key), v
	}
	END { print "json-end", (seen ? d : -1) }
	' "$1"
}

# The value at PATH in the flattened document, empty when absent.
jget() { # path
	awk -v p="$1" '$1 == p { sub(/^[^ ]* /, ""); print; exit }' /tmp/probe.flat
}

# The index of the analysis' configuration labelled LABEL (deep, c1,
# lease@0, lease@auto=N), empty without one.
cfg_of() { # label
	awk -v l="$1" '$1 ~ /^devices\.0\.analysis\.configs\.[0-9]+\.label$/ && $2 == l {
		split($1, f, ".")
		print f[5]
		exit
	}' /tmp/probe.flat
}

# a / b with 3 decimals, empty when either is missing or b is not positive
ratio() { # a b
	awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.3f\n", a / b }'
}

# whether the number A is above B (awk: the shell has no floats)
above() { # a b
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 > b + 0) }'
}

# every CPU's resume latency and the disk's knobs where the kernel has
# them: what the probe must put back
probe_found() { # disk
	for f in /sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us \
		"$(knob "$1" limit_us)" "$(knob "$1" timeout_ms)"; do
		[ -e "$f" ] && echo "$f $(cat "$f")"
	done
}

check_probe() {
	local_disk=nullb0
	# The burst check's cross shape (guest/lease.sh): the probe reads on
	# CPU1, the completion timer runs on CPU0 and the completion comes
	# back to CPU1 by IPI, so that CPU1's governor has no timer telling
	# it when the read ends, as with a real disk's interrupt. With the
	# timer on the reading CPU (null_blk's own irqmode=2) the governor
	# sees each completion coming and never picks C6 for a read: deep
	# measured as c1 (deep/c1 QD1 p99 1.07 on icx).
	mknull $local_disk queue_mode=2 irqmode=2 completion_nsec=50000 \
		submit_queues=2 complete_cpu=0 || { fail probe-setup-nullb; return; }
	echo 2 >/sys/block/$local_disk/queue/rq_affinity
	probe_found $local_disk >/tmp/probe.found
	measure "probe_setup table=$IDLE kernel=$MODE $(grep -c . /tmp/probe.found) values duration=${PROBE_SECS}s timeout=${PROBE_TIMEOUT_MS}ms"
	t0=$(cut -d' ' -f1 /proc/uptime)
	# --cpu 1: the reads on CPU1 (the probe pins its reading thread, not
	# the lease child, which a taskset here would pin beside them)
	blkqos probe /dev/$local_disk --cpu 1 --duration "$PROBE_SECS" --limits auto,0 \
		--timeout $PROBE_TIMEOUT_MS --json \
		>/tmp/probe.json 2>/tmp/probe.err
	rc=$?
	t1=$(cut -d' ' -f1 /proc/uptime)
	measure "probe_time guest_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') rc=$rc"
	sed 's/^/probe stderr: /' /tmp/probe.err | head -n 20
	expect "probe-exit-status $rc" "$rc" = 0

	# what it found is back: the CPUs' resume latency, the knobs
	probe_found $local_disk >/tmp/probe.after
	if cmp -s /tmp/probe.found /tmp/probe.after; then
		pass "probe-puts-back $(grep -c . /tmp/probe.after) values"
	else
		diff /tmp/probe.found /tmp/probe.after | sed 's/^/probe put-back: /'
		fail probe-puts-back
	fi
	left=$(ls $PROBE_STATE/probe-profile.toml $PROBE_STATE/probe-lease.log \
		$PROBE_STATE/lease.json 2>/dev/null)
	expect "probe-state-clean ${left:-none}" -z "$left"
	# a lease child that outlived its probe would still hold the CPUs
	procs=
	for c in /proc/[0-9]*/comm; do
		[ "$(cat "$c" 2>/dev/null)" != blkqos ] || procs="$procs ${c%/comm}"
	done
	expect "probe-no-process-left${procs:- none}" -z "$procs"

	json_flat /tmp/probe.json >/tmp/probe.flat
	if [ "$(jget json-end)" != 0 ] || [ -z "$(jget devices.0.name)" ]; then
		sed 's/^/probe json: /' /tmp/probe.json | head -n 40
		fail "probe-json-parses (depth $(jget json-end), name '$(jget devices.0.name)')"
		return
	fi
	pass "probe-json-parses $(grep -c . /tmp/probe.flat) values"
	knobs=false
	[ "$MODE" != psd ] || knobs=true
	expect "probe-kernel-knobs $(jget devices.0.kernel_knobs) on $MODE" \
		"$(jget devices.0.kernel_knobs)" = $knobs
	probe_table
	case $IDLE in
	icx) probe_icx ;;
	epyc) probe_epyc ;;
	esac >/tmp/probe.checks
	cat /tmp/probe.checks
	# a failed answer's whole analysis, to tell the probe's fault from
	# the check's
	! grep -q '^BLKQOS-CHECK FAIL' /tmp/probe.checks ||
		grep '^devices\.0\.analysis\.' /tmp/probe.flat | sed 's/^/probe analysis: /'
	[ "$MODE" != psd ] || check_kernel_auto $local_disk
	rmnull $local_disk
}

# "auto" as the running lease kernel resolves it on this table, through
# the real path (I/O to a lease): the limit CPU1's lease shows while a
# disk at "auto" has I/O there, once the probe's own leases have lapsed.
# Ice Lake: C1E's 4 us, C6 ruled out (the same under v3's 20 us bound:
# the KUnit case lease_auto_limit is what tells the two rules apart, on
# ten idle tables).
check_kernel_auto() { # disk
	d=$1
	case $IDLE in
	icx) want=4 ;;
	spr | model) want=2 ;;
	epyc) want=1 ;;
	esac
	lease_wait_free 1 ||
		{ fail "probe-kernel-auto-$IDLE (CPU1 still held: $(sysfs_lease 1))"; return; }
	tmo=$(cat "$(knob $d timeout_ms)")
	echo 200 >"$(knob $d timeout_ms)"
	echo auto >"$(knob $d limit_us)"
	fio --name=ka --filename=/dev/$d --rw=randread --bs=4k --ioengine=psync \
		--direct=1 --cpus_allowed=1 --time_based --runtime=1 --size=64m \
		--output-format=terse >/dev/null 2>&1 &
	pid=$!
	seen=none i=0
	while [ $i -lt 300 ]; do
		set -- $(sysfs_lease 1)
		[ "$1" = -1 ] || { seen=$1; break; }
		sleep 0.01
		i=$((i + 1))
	done
	wait $pid
	echo -1 >"$(knob $d limit_us)"
	echo "$tmo" >"$(knob $d timeout_ms)"
	expect "probe-kernel-auto-$IDLE cpu1=$seen want=$want" "$seen" = "$want"
}

# The probe's figures as its table has them, one line per configuration,
# and its answer: the console log shows what it measured.
probe_table() {
	a=devices.0.analysis
	measure "probe_run rounds=$(jget devices.0.rounds) run_secs=$(jget devices.0.run_secs) duration_secs=$(jget devices.0.duration_secs) cpu_secs=$(jget devices.0.cpu_secs) reference=$(jget $a.reference) noisy=$(jget $a.noisy) skipped=$(jget devices.0.skipped)"
	i=0
	while [ -n "$(jget $a.configs.$i.label)" ]; do
		c=$a.configs.$i
		r=$c.vs_reference
		measure "probe_config $(jget $c.label) runs=$(jget $c.runs) qd1_p50=$(jget $c.qd1.p50_us) qd1_p99=$(jget $c.qd1.p99_us) qd1_p999=$(jget $c.qd1.p999_us) p99_int=[$(jget $c.p99_interval_us.lo),$(jget $c.p99_interval_us.hi)] iops=$(jget $c.iops) first_p90=$(jget $c.first.p90_us) first_p99=$(jget $c.first.p99_us) first_n=$(jget $c.first.samples) deep_res=$(jget $c.deep_residency) burst_deep_res=$(jget $c.burst_deep_residency) p99_ratio=$(jget $r.qd1_p99.ratio)[$(jget $r.qd1_p99.lo),$(jget $r.qd1_p99.hi)]$(jget $r.qd1_p99.called) first_ratio=$(jget $r.first_p90.ratio)[$(jget $r.first_p90.lo),$(jget $r.first_p90.hi)]$(jget $r.first_p90.called)"
		i=$((i + 1))
	done
	measure "probe_spread pairs=$(jget $a.spread.pairs) qd1_p99_pct=$(jget $a.spread.qd1_p99_pct) first_p90_pct=$(jget $a.spread.first_p90_pct) iops_pct=$(jget $a.spread.iops_pct)"
	measure "probe_answer kind=$(jget $a.answer.kind) limit_us=$(jget $a.answer.limit_us) label=$(jget $a.answer.label) why=$(jget $a.answer.why)"
	deep=$(cfg_of deep)
	c1=$(cfg_of c1)
	# deep over c1, straight from their percentiles (whatever the
	# reference of the ratios is)
	qd1_r=$(ratio "$(jget $a.configs.$deep.qd1.p99_us)" "$(jget $a.configs.$c1.qd1.p99_us)")
	first_r=$(ratio "$(jget $a.configs.$deep.first.p99_us)" "$(jget $a.configs.$c1.first.p99_us)")
	first90_r=$(ratio "$(jget $a.configs.$deep.first.p90_us)" "$(jget $a.configs.$c1.first.p90_us)")
	measure "probe_deep_over_c1 table=$IDLE qd1_p99=$qd1_r first_p99=$first_r first_p90=$first90_r"
}

# Ice Lake: C6's 170 us exit is paid by a 50 us read whose CPU went deep;
# C1E's 4 us hardly shows. The probe must see that and answer with a
# limit that rules C6 out. Whether it keeps C1E (limit 4, "auto") is
# printed, not checked (issue 40 expects it kept): C1E's 4 us exit is a
# few per cent of a read here, and the answer wants the upper end of the
# ratio's interval within 5 %. Measured (lease kernel, 20 s): limit 4 at
# QD1 p99 1.02 times c1's [0.98, 1.09], first-of-burst p90 1.05 [1.03,
# 1.08]. Since the probe answers "too noisy" at a QD1 p99 A/A spread
# over 10 % (main 9ac048f), a boot whose runs spread that far gives no
# limit at all (17 % and 109 % in two boots before the guest was quieted;
# 10.5 % in a CI run since): the check below then takes that answer.
probe_icx() {
	ok=no
	{ above "$qd1_r" 1.5 || above "$first_r" 1.5; } && ok=yes
	expect "probe-icx-deep-over-c1-p99-above-1.5 qd1=$qd1_r first=$first_r" $ok = yes
	kind=$(jget $a.answer.kind)
	lim=$(jget $a.answer.limit_us)
	# Unless the host's load spread this boot's runs past what the probe
	# answers for (over 10 %; a CI run: QD1 p99 A/A spread 10.5 %): "too noisy" is
	# then the answer that spread calls for, as the EPYC check takes it,
	# and the limit is not checked in this boot (the log says so)
	sp=$(jget $a.answer.spread_pct)
	if [ "$kind" = too_noisy ] && above "${sp:-0}" 10; then
		pass "probe-icx-recommends-a-limit-without-c6 too noisy: A/A spread $sp %, the limit not checked in this boot"
	else
		expect "probe-icx-recommends-a-limit-without-c6 $kind $lim" "$kind" = limit -a \
			"${lim:-170}" -lt 170
	fi
	l=$(cfg_of "lease@auto=4")
	c1e=no
	[ "$kind" = limit ] && [ "${lim:-0}" -ge 4 ] && c1e=yes
	expect "probe-icx-auto-keeps-c1e $(jget $a.configs.$l.label)" -n "$l"
	measure "probe_icx_keeps_c1e $c1e limit=$lim lease@auto=4: qd1_p99 $(jget $a.configs.$l.vs_reference.qd1_p99.ratio) [$(jget $a.configs.$l.vs_reference.qd1_p99.lo), $(jget $a.configs.$l.vs_reference.qd1_p99.hi)] first_p90 $(jget $a.configs.$l.vs_reference.first_p90.ratio) [$(jget $a.configs.$l.vs_reference.first_p90.lo), $(jget $a.configs.$l.vs_reference.first_p90.hi)]"
}

# EPYC (acpi_idle: C1 1/2, C2 18/36): a complete document, and an answer
# that agrees with the ratios it measured.
probe_epyc() {
	missing=
	for p in reference answer.kind spread.pairs; do
		[ -n "$(jget $a.$p)" ] || missing="$missing $p"
	done
	i=0
	while [ -n "$(jget $a.configs.$i.label)" ]; do
		for p in qd1.p99_us first.p90_us iops vs_reference.qd1_p99.ratio \
			vs_reference.first_p90.ratio; do
			[ -n "$(jget $a.configs.$i.$p)" ] ||
				missing="$missing $(jget $a.configs.$i.label):$p"
		done
		i=$((i + 1))
	done
	# "auto" as blkqos resolves it where the kernel has no knobs: C1's
	# 1 us, C2 ruled out (it resolved to 18 before, ruling out nothing)
	expect "probe-epyc-auto-rules-out-c2 $(jget $a.configs.$(cfg_of lease@auto=1).label)" \
		-n "$(cfg_of lease@auto=1)"
	expect "probe-epyc-json-complete $i configs${missing:+, missing$missing}" \
		"$i" -ge 4 -a -z "$missing"
	kind=$(jget $a.answer.kind)
	lim=$(jget $a.answer.limit_us)
	# deep slower than the reference by more than 5 %, called so: C2's
	# exit costs something, and the answer must buy it back
	deep_worse=no
	for s in qd1_p99 first_p90; do
		[ "$(jget $a.configs.$deep.vs_reference.$s.called)" = true ] &&
			above "$(jget $a.configs.$deep.vs_reference.$s.ratio)" 1.05 &&
			deep_worse=$s
	done
	case $kind in
	limit)
		# the limit chosen stays within 5 % of the reference, and rules
		# C2 out
		l=$(cfg_of "$(jget $a.answer.label)")
		hi=$(jget $a.configs.$l.vs_reference.qd1_p99.hi)
		fhi=$(jget $a.configs.$l.vs_reference.first_p90.hi)
		ok=no
		[ -n "$l" ] && [ "${lim:-99}" -lt 18 ] && ! above "$hi" 1.05 &&
			! above "$fhi" 1.05 && ok=yes
		expect "probe-epyc-answer-consistent limit $lim (deep worse on $deep_worse; its ratios' upper ends p99 $hi first $fhi)" \
			$ok = yes
		;;
	nothing_to_buy)
		expect "probe-epyc-answer-consistent nothing to buy (deep worse on $deep_worse)" \
			"$deep_worse" = no
		;;
	too_noisy)
		# nothing qualified, and runs of one configuration differed by
		# more than the 5 % a limit must stay within: the answer the
		# document's spread calls for
		sp=$(jget $a.answer.spread_pct)
		ok=no
		above "$sp" 5 && ok=yes
		expect "probe-epyc-answer-consistent too noisy: A/A spread $sp %" $ok = yes
		;;
	*)
		fail "probe-epyc-answer-consistent $kind (deep worse on $deep_worse)"
		;;
	esac
}
