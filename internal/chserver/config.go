package chserver

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// FindBinary returns the server binary (empty means clickhouse-server),
// looked up on PATH and then in /usr/sbin, where Debian puts it, or an
// error that says which package to install.
func FindBinary(binary string) (string, error) {
	if binary == "" {
		binary = "clickhouse-server"
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	if !strings.Contains(binary, "/") {
		if p, err := exec.LookPath(filepath.Join("/usr/sbin", binary)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("cannot find %s on PATH or in /usr/sbin: install the clickhouse-server package (Debian)", binary)
}

// User is an account besides "default" in the users config.
type User struct {
	Name, Password string
}

// RenderConfig returns the server config and the users config for a
// server whose data, temp files, user files and logs live under dir,
// listening on 127.0.0.1 only, with one user "default" without a
// password who may connect from loopback, plus users (plain-text
// passwords, loopback only). `<yandex>` is still accepted as the root
// element by current releases.
func RenderConfig(dir string, httpPort, tcpPort int, users ...User) (config, usersXML []byte) {
	p := func(name string) string { return xmlEscape(filepath.Join(dir, name)) + "/" }
	config = fmt.Appendf(nil, `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]sserver.log</log>
        <errorlog>%[1]sserver.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>%[2]d</http_port>
    <tcp_port>%[3]d</tcp_port>
    <path>%[4]s</path>
    <tmp_path>%[5]s</tmp_path>
    <user_files_path>%[6]s</user_files_path>
    <format_schema_path>%[7]s</format_schema_path>
    <users_config>%[8]s</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>536870912</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`, p("log"), httpPort, tcpPort, p("data"), p("tmp"), p("user_files"), p("format_schemas"), xmlEscape(filepath.Join(dir, "users.xml")))
	var extra strings.Builder
	for _, u := range users {
		fmt.Fprintf(&extra, `        <%[1]s>
            <password>%[2]s</password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </%[1]s>
`, u.Name, xmlEscape(u.Password))
	}
	usersXML = fmt.Appendf(nil, `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
%s    </users>
    <quotas>
        <default></default>
    </quotas>
</yandex>
`, extra.String())
	return config, usersXML
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
