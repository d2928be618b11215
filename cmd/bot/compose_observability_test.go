package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeObservabilityProfileIsWired checks the compose profile
// "observability" end to end without Docker: each of its services is in
// the profile, every file it mounts exists in the repository, Prometheus
// loads the alert rules where they are mounted and scrapes the bot's
// HTTP port, Grafana's dashboard provider reads where the dashboard is
// mounted and its data source is the Prometheus service, and the
// collector is started on the config mounted for it with an OTLP/HTTP
// receiver on 4318 (where .env points the bot).
func TestComposeObservabilityProfileIsWired(t *testing.T) {
	c := readCompose(t)
	// mounts maps a service's container paths to repository files.
	mounts := func(name string) map[string]string {
		t.Helper()
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no %s service", name)
		}
		if !slices.Contains(s.Profiles, "observability") {
			t.Errorf("%s is not in the observability profile: %v", name, s.Profiles)
		}
		out := map[string]string{}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
				continue
			}
			src := filepath.Join("../..", parts[0])
			if _, err := os.Stat(src); err != nil {
				t.Errorf("%s mounts %s: %v", name, parts[0], err)
			}
			out[parts[1]] = src
		}
		return out
	}
	readYAML := func(path string, into any) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}

	// Prometheus: its config and rules mounted, the rules loaded from
	// where they are mounted, the bot scraped on its HTTP port.
	pm := mounts("prometheus")
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	cfg, ok := pm["/etc/prometheus/prometheus.yml"]
	if !ok {
		t.Fatalf("prometheus.yml not mounted where Prometheus reads it: %v", pm)
	}
	readYAML(cfg, &prom)
	for _, r := range prom.RuleFiles {
		if src, ok := pm[r]; !ok || filepath.Base(src) != "alerts.yml" {
			t.Errorf("rule file %s is not the mounted alerts.yml (mounts %v)", r, pm)
		}
	}
	if len(prom.RuleFiles) == 0 {
		t.Error("Prometheus loads no rule files")
	}
	_, botPort, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(c.Services["bot"].Environment["MARLOWE_HTTP_ADDR"], "${MARLOWE_HTTP_ADDR:-"), "}"))
	if err != nil {
		t.Fatalf("bot's MARLOWE_HTTP_ADDR: %v", err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if !slices.Contains(targets, "bot:"+botPort) {
		t.Errorf("Prometheus scrapes %v, not the bot's bot:%s", targets, botPort)
	}

	// Grafana: the provider reads the mounted dashboards, the data source
	// is the Prometheus service.
	gm := mounts("grafana")
	prov, dash := "", ""
	for dst, src := range gm {
		switch filepath.Base(src) {
		case "provisioning":
			prov = src
		case "dashboards":
			dash = dst
		}
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(filepath.Join(prov, "dashboards", "marlowe.yml"), &provider)
	if len(provider.Providers) != 1 || provider.Providers[0].Options.Path != dash {
		t.Errorf("dashboard provider reads %+v, dashboards are mounted at %q", provider.Providers, dash)
	}
	if _, err := os.Stat(filepath.Join(gm[dash], "marlowe.json")); err != nil {
		t.Error(err)
	}
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(filepath.Join(prov, "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana's data source = %+v, want the prometheus service", ds.Datasources)
	}

	// The collector: started on its mounted config, which receives
	// OTLP/HTTP on 4318 and has a traces pipeline from it.
	om := mounts("otel-collector")
	var col struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					HTTP struct {
						Endpoint string `yaml:"endpoint"`
					} `yaml:"http"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Service struct {
			Pipelines map[string]struct {
				Receivers []string `yaml:"receivers"`
				Exporters []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	colCfg := ""
	for dst, src := range om {
		if slices.Contains(c.Services["otel-collector"].Command, "--config="+dst) {
			colCfg = src
		}
	}
	if colCfg == "" {
		t.Fatalf("the collector's --config is not a mounted file (command %v, mounts %v)", c.Services["otel-collector"].Command, om)
	}
	readYAML(colCfg, &col)
	if !strings.HasSuffix(col.Receivers.OTLP.Protocols.HTTP.Endpoint, ":4318") {
		t.Errorf("collector OTLP/HTTP receiver on %q, want :4318", col.Receivers.OTLP.Protocols.HTTP.Endpoint)
	}
	if p := col.Service.Pipelines["traces"]; !slices.Contains(p.Receivers, "otlp") || len(p.Exporters) == 0 {
		t.Errorf("collector traces pipeline = %+v", p)
	}
}
