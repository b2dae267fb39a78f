# shellcheck shell=bash
# tests/system/pair/prometheus.sh - one Prometheus (on a) scraping both daemons: both
# targets up, per-node series, and the protection alert fires for b alone while b's
# filter is off, then resolves. Prometheus loads the shipped rules with every `for:`
# made 4s (what the shipped durations do is proven on the host by `promtool test
# rules`, dashboards/asmguard-alerts.test.yml): the pair held both guest slots for
# the shipped minute after its last test.
# A two-node test (tests/system/pair.sh runs it): sourced by the
# host's driver, it runs commands on the nodes (on NODE CMD, send/recv) and reports
# through the labs' result contract (pass, fail, ok, refused, same, within5).

# pair_prometheus_start: before every test's run: Prometheus takes a while to come
# up under TCG.
pair_prometheus_start() {
	on a "sed 's/^\\( *for:\\) .*/\\1 4s/' /etc/prometheus/asmguard-alerts.yml >/etc/prometheus/asmguard-alerts.lab.yml && grep -q '^ *for: 4s\$' /etc/prometheus/asmguard-alerts.lab.yml"
	ok prometheus.lab-rules "the shipped rules with for: 4s"
	on a "cat >/etc/prometheus/prometheus.yml <<YML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - /etc/prometheus/asmguard-alerts.lab.yml
scrape_configs:
  - job_name: asmguard
    static_configs:
      - targets: ['10.24.0.1:9465', '10.24.0.2:9465']
YML
systemctl start prometheus.service"
	ok prometheus.start "Prometheus started on a, scraping 10.24.0.1:9465 and 10.24.0.2:9465"
}

# pair_prometheus_run: the targets and series; then b's filter off (the alert fires
# during the tests after this one).
pair_prometheus_run() {
	on a "until_true 120 prom_up_is 2; prom_up" 150
	same prometheus.both-targets-up 2 "$OUT" "targets up: $OUT"
	on a "until_true 30 prom_series_is asmguard_protected 2; promq asmguard_protected"
	same prometheus.per-node-series "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 1')" "$OUT" "asmguard_protected by instance: $OUT"
	on a "promq 'asmguard_disk_info{label=\"PAIRRC\"}'"
	same prometheus.per-node-disk-series "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 1')" "$OUT" "asmguard_disk_info{label=\"PAIRRC\"} by instance: $OUT"
	t_off=$SECONDS
	on b "$C filter disable"
	ok prometheus.b-filter-disable
}

# pair_prometheus_finish: after every test's run: the alert fires for b only, and
# resolves once b's filter is on again.
pair_prometheus_finish() {
	rules=/etc/prometheus/asmguard-alerts.lab.yml
	on a "awk '/^ *- alert:/ { a = \$3 } /^ *expr: *asmguard_protected *== *0 *\$/ { print a; exit }' $rules"
	alert=$OUT
	[ -n "$alert" ] || fail prometheus.protection-rule "no rule on asmguard_protected == 0"
	on a "until_true 150 alert_firing $alert; prom_alerts $alert" 180
	same prometheus.alert-fires-for-b-only "10.24.0.2:9465 firing" "$OUT" "$alert in /api/v1/alerts $((SECONDS - t_off)) s after b's filter disable: $OUT"
	info "prometheus: $alert firing for b $((SECONDS - t_off)) s after filter disable (for: 4s here)"
	on a "promq asmguard_protected"
	same prometheus.per-node-values "$(printf '10.24.0.1:9465 1\n10.24.0.2:9465 0')" "$OUT" "asmguard_protected by instance while b's filter is off"
	on b "$C filter enable"
	ok prometheus.b-filter-enable
	on a "until_true 60 alert_gone $alert; prom_alerts $alert" 90
	same prometheus.alert-resolves "" "$OUT" "$alert gone from /api/v1/alerts after b's filter enable"
}
