#!/bin/sh
# prometheus: the image's Prometheus scrapes the packaged asmguardd (its metrics
# listener, 127.0.0.1:9465 by default): the target is up in the Prometheus API and
# asmguard_protected reads 1 through a PromQL query. It also loads the project's alert
# rules (dashboards/asmguard-alerts.yml, put in the image by its recipe): every rule of
# the file is listed by /api/v1/rules without a load error; `asmguardctl filter
# disable` makes the protection alert (the rule on `asmguard_protected == 0`, its name
# and `for:` read from the file) reach `firing` in /api/v1/alerts, and `filter enable`
# resolves it. The rules are loaded from a copy whose `for:` durations are 4s, so the
# alert fires in seconds, not after the shipped minute: what the shipped durations do
# (pending for exactly their `for:`, then firing) is proven on the host by `promtool
# test rules` (dashboards/asmguard-alerts.test.yml, crates/metrics/tests/dashboard.rs),
# without waiting a real minute twice per kernel line. Nothing here depends on the
# kernel (the exporter's per-kernel series are the VM lab's iolat test): one line.
# lab-settings: one-line
. /vmtests/lib.sh
. /vmtests/syslib.sh

shipped=/etc/prometheus/asmguard-alerts.yml
rules=/etc/prometheus/asmguard-alerts.lab.yml
sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
[ -s "$shipped" ] || { fail setup "no $shipped in the image"; vm_exit; }
# the shipped rules with every for: made 4s (names, expressions and labels unchanged)
sed 's/^\( *for:\) .*/\1 4s/' "$shipped" >"$rules"
grep -q '^ *for: 4s$' "$rules" || { fail setup "no for: in $shipped to shorten"; vm_exit; }
# a test-only evaluation interval (the shipped rules' for: durations are unchanged)
cat >/etc/prometheus/prometheus.yml <<YML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $rules
scrape_configs:
  - job_name: asmguard
    static_configs:
      - targets: ["127.0.0.1:9465"]
YML
expect_ok start systemctl start prometheus.service
api=http://127.0.0.1:9090/api/v1
i=0
until curl -fs "$api/targets" 2>/dev/null | grep -q '"job":"asmguard".*"health":"up"\|"health":"up".*"job":"asmguard"' || [ $i -ge 120 ]; do
	i=$((i + 1)); sleep 1
done
t=$(curl -fs "$api/targets" 2>&1)
if echo "$t" | grep -q '"health":"up"'; then
	pass target-up "after ${i}s: $(echo "$t" | grep -o '"scrapeUrl":"[^"]*"' | head -n 1)"
else
	fail target-up "$t :: $(journalctl -u prometheus --no-pager -n 5 -o cat)"
fi
# check_protected CHECK: asmguard_protected reads 1 through PromQL
check_protected() {
	q=$(curl -fs "$api/query?query=asmguard_protected" 2>&1)
	case $q in
	*'"value":['*',"1"]'*) pass "$1" "$q" ;;
	*) fail "$1" "$q" ;;
	esac
}
check_protected protected-query
# service_status CHECK PREFIX: the line systemd shows for the service
# (`systemctl status`: Status) starts with PREFIX within 5 s (the daemon
# sends it again within its 2 s check when protection changes)
service_status() {
	i=0
	until st=$(systemctl show -p StatusText --value asmguard.service) && [ "${st#"$2"}" != "$st" ] || [ $i -ge 50 ]; do
		i=$((i + 1)); sleep 0.1
	done
	if [ "${st#"$2"}" != "$st" ]; then pass "$1" "Status: $st"; else fail "$1" "want Status: $2..., got '$st'"; fi
}
service_status service-status-protected "protected: "

# ---- the alert rules ----------------------------------------------------------
# every alert the file defines is loaded, and no rule reports an evaluation error
want=$(sed -n 's/^ *- alert: *//p' "$rules" | sort)
r=$(curl -fs "$api/rules?type=alert" 2>&1)
got=$(echo "$r" | grep -o '"name":"[^"]*","query"' | sed 's/"name":"\([^"]*\)".*/\1/' | sort)
if [ -n "$want" ] && [ "$want" = "$got" ]; then
	pass rules-loaded "$(echo "$want" | wc -l) alerts: $(echo "$want" | tr '\n' ' ')"
else
	fail rules-loaded "want [$(echo "$want" | tr '\n' ' ')] got [$(echo "$got" | tr '\n' ' ')] :: $(journalctl -u prometheus --no-pager -o cat | grep -i rule | tail -n 3)"
fi
i=0
until curl -fs "$api/rules" 2>/dev/null | grep -q '"lastEvaluation":"2' || [ $i -ge 30 ]; do i=$((i + 1)); sleep 1; done
r=$(curl -fs "$api/rules" 2>&1)
if echo "$r" | grep -q '"lastEvaluation":"2' && ! echo "$r" | grep -q '"health":"err'; then
	pass rules-healthy "evaluated, no rule in error"
else
	fail rules-healthy "$(echo "$r" | grep -o '"lastError":"[^"]*"' | head -n 3) $(echo "$r" | cut -c1-200)"
fi

# the protection alert: the rule whose expression is "asmguard_protected == 0"
alert=$(awk '/^ *- alert:/ { a = $3 } /^ *expr: *asmguard_protected *== *0 *$/ { print a; exit }' "$rules")
hold=$(awk -v a="$alert" '/^ *- alert:/ { on = ($3 == a) } on && /^ *for:/ { print $2; exit }' "$shipped")
[ -n "$alert" ] || { fail protection-rule "no rule on asmguard_protected == 0 in $rules"; vm_exit; }
info "prometheus: protection alert $alert, for: ${hold:-none}"
# alert_state NAME: the state of NAME in /api/v1/alerts (pending, firing), or nothing
alert_state() {
	curl -fs "$api/alerts" 2>/dev/null | sed 's/},{"labels"/}\n{"labels"/g' | grep "\"alertname\":\"$1\"" |
		grep -o '"state":"[a-z]*"' | cut -d'"' -f4 | head -n 1
}
s=$(alert_state "$alert")
[ -z "$s" ] && pass alert-quiet-while-protected "$alert not in /api/v1/alerts" ||
	fail alert-quiet-while-protected "$alert is $s while the filter is on"

t0=$(date +%s)
expect_ok filter-disable $C filter disable
service_status service-status-off "PROTECTION OFF (filter disabled): "
i=0
while [ "$(alert_state "$alert")" != firing ] && [ $i -lt 150 ]; do i=$((i + 1)); sleep 1; done
s=$(alert_state "$alert")
if [ "$s" = firing ]; then
	pass alert-fires "$alert firing $(($(date +%s) - t0)) s after filter disable (for: 4s here, $hold shipped)"
	info "prometheus: $alert firing $(($(date +%s) - t0)) s after filter disable"
else
	fail alert-fires "$alert is '${s:-absent}' 150 s after filter disable: $(curl -fs "$api/alerts" 2>&1 | cut -c1-250)"
fi

t0=$(date +%s)
expect_ok filter-enable $C filter enable
i=0
while [ -n "$(alert_state "$alert")" ] && [ $i -lt 60 ]; do i=$((i + 1)); sleep 1; done
s=$(alert_state "$alert")
if [ -z "$s" ]; then
	pass alert-resolves "$alert gone from /api/v1/alerts $(($(date +%s) - t0)) s after filter enable"
else
	fail alert-resolves "$alert still '$s' 60 s after filter enable"
fi
check_protected protected-again
service_status service-status-protected-again "protected: "
systemctl stop prometheus.service
vm_exit
