# Sourced by the guest's /init (guest-init.sh). The knob ABI on the patched kernel: the sysfs files, what each governor
# selects under a limit, auto never polling, racing stores.

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
	# "auto": the deepest halting state within 10 us of the shallowest, C1 here
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
