#!/bin/sh
# prometheus: the image's Prometheus scrapes the packaged asmguardd (its metrics
# listener, 127.0.0.1:9465 by default): the target is up in the Prometheus API and
# asmguard_protected reads 1 through a PromQL query.
. /vmtests/lib.sh
. /vmtests/syslib.sh

sys_service_up || { fail setup "asmguard does not answer"; vm_exit; }
cat >/etc/prometheus/prometheus.yml <<'YML'
global:
  scrape_interval: 2s
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
q=$(curl -fs "$api/query?query=asmguard_protected" 2>&1)
case $q in
*'"value":['*',"1"]'*) pass protected-query "$q" ;;
*) fail protected-query "$q" ;;
esac
systemctl stop prometheus.service
vm_exit
