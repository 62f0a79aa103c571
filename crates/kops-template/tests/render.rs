//! Templates in the style of kops' cluster-template docs and its templater tests, with the
//! output kops (Go text/template + Sprig) gives for them.

use kops_template::toolbox::{self, ToolboxOptions};
use kops_template::values::yaml_to_json;
use kops_template::Error;
use serde_json::Value;

fn ctx(values: &str) -> Value {
    yaml_to_json(values).unwrap()
}

fn render_with(
    tpl: &str,
    values: &str,
    snippets: &[(&str, &str)],
    fail: bool,
) -> Result<String, Error> {
    let snippets: Vec<(String, String)> = snippets
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    toolbox::render_one(
        "cluster.tmpl.yaml",
        tpl,
        &ctx(values),
        &snippets,
        fail,
        &|_| {},
    )
}

fn render(tpl: &str, values: &str) -> String {
    render_with(tpl, values, &[], true).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn plain_values_and_nested_maps() {
    assert_eq!(
        render("hello {{ .name }} {{.id}}", "name: world\nid: 99"),
        "hello world 99"
    );
    assert_eq!(
        render("hello {{ .s.name }} {{ .s.id }}", "s: {id: 1, name: test}"),
        "hello test 1"
    );
    assert_eq!(
        render("{{ lower \"Hello\" }} {{ upper \"Hello\" }}", "{}"),
        "hello HELLO"
    );
    assert_eq!(
        render("{{ .list | join \",\" }}", "list: [a, b, c]"),
        "a,b,c"
    );
}

#[test]
fn values_print_like_go() {
    // Values files go through JSON in kops: numbers are float64.
    let out = render(
        "{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ .e }} {{ .f }}",
        "a: 3\nb: 1.5\nc: 1000000\nd: [x, 2]\ne: {k: v}\nf: true",
    );
    assert_eq!(out, "3 1.5 1e+06 [x 2] map[k:v] true");
}

#[test]
fn instance_groups_from_a_list() {
    let values = r#"
clusterName: dev.example.com
awsRegion: eu-west-1
kubernetesVersion: 1.30.2
instanceGroups:
  - name: nodes-a
    machineType: m5.large
    min: 2
    max: 4
    zones: [a]
  - name: nodes-b
    machineType: m5.xlarge
    min: 1
    max: 3
    zones: [b, c]
"#;
    let tpl = r#"{{- range $i, $ig := .instanceGroups }}
{{- if $i }}
---
{{- end }}
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: {{ $.clusterName }}
  name: {{ $ig.name }}
spec:
  machineType: {{ .machineType }}
  maxSize: {{ .max }}
  minSize: {{ .min }}
  role: Node
  subnets:
  {{- range .zones }}
  - {{ $.awsRegion }}{{ . }}
  {{- end }}
{{- end }}
"#;
    let expected = r#"
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: dev.example.com
  name: nodes-a
spec:
  machineType: m5.large
  maxSize: 4
  minSize: 2
  role: Node
  subnets:
  - eu-west-1a
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: dev.example.com
  name: nodes-b
spec:
  machineType: m5.xlarge
  maxSize: 3
  minSize: 1
  role: Node
  subnets:
  - eu-west-1b
  - eu-west-1c
"#;
    assert_eq!(render(tpl, values), expected);
}

#[test]
fn if_else_chains_and_with() {
    let tpl = "{{ if eq .env \"prod\" }}big{{ else if eq .env \"staging\" }}medium{{ else }}small{{ end }}";
    assert_eq!(render(tpl, "env: prod"), "big");
    assert_eq!(render(tpl, "env: staging"), "medium");
    assert_eq!(render(tpl, "env: dev"), "small");
    let tpl = "{{ with .bastion }}bastion: {{ .type }}{{ else }}no bastion{{ end }}";
    assert_eq!(
        render(tpl, "bastion: {type: t3.micro}"),
        "bastion: t3.micro"
    );
    assert_eq!(render(tpl, "bastion: {}"), "no bastion");
    let tpl = "{{ if and .a (not .b) }}yes{{ end }}{{ if or .b .c }}-or{{ end }}";
    assert_eq!(render(tpl, "a: true\nb: false\nc: 1"), "yes-or");
    // `and` stops at the first false operand: the missing key after it is never looked up.
    assert_eq!(
        render("{{ if and false .nope }}x{{ else }}y{{ end }}", "{}"),
        "y"
    );
}

#[test]
fn variables_scopes_and_range_forms() {
    let tpl = "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ $y := 3 }}{{ end }}{{ $x }}";
    assert_eq!(render(tpl, "{}"), "2");
    let tpl = "{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}";
    assert_eq!(render(tpl, "m: {b: 2, a: 1, c: x}"), "a=1;b=2;c=x;");
    let tpl = "{{ range .l }}{{ if eq . \"skip\" }}{{ continue }}{{ end }}{{ if eq . \"stop\" }}{{ break }}{{ end }}{{ . }},{{ end }}";
    assert_eq!(render(tpl, "l: [a, skip, b, stop, c]"), "a,b,");
    assert_eq!(
        render("{{ range .none }}x{{ else }}empty{{ end }}", "none: []"),
        "empty"
    );
    assert_eq!(render("{{ range 3 }}{{ . }}{{ end }}", "{}"), "012");
    assert_eq!(
        render("{{ range $e := .l }}{{ $e }}{{ end }}", "l: [p, q]"),
        "pq"
    );
}

#[test]
fn define_template_and_block() {
    let tpl = r#"{{ define "subnet" }}- name: {{ .name }}
  cidr: {{ .cidr }}
{{ end }}subnets:
{{ range .subnets }}{{ template "subnet" . }}{{ end }}{{ block "extra" . }}default-extra{{ end }}"#;
    let out = render(
        tpl,
        "subnets: [{name: a, cidr: 10.0.0.0/24}, {name: b, cidr: 10.0.1.0/24}]",
    );
    assert_eq!(
        out,
        "subnets:\n- name: a\n  cidr: 10.0.0.0/24\n- name: b\n  cidr: 10.0.1.0/24\ndefault-extra"
    );
}

#[test]
fn whitespace_trimming_and_comments() {
    assert_eq!(render("a  {{- 1 -}}  b", "{}"), "a1b");
    assert_eq!(render("a\n{{- /* a comment */ -}}\nb", "{}"), "ab");
    assert_eq!(render("a {{/* c */}} b", "{}"), "a  b");
    assert_eq!(render("{{ -3 }}", "{}"), "-3");
    // From kops' templater integration cases.
    let tpl = "cluster:\n{{- range .etcd }}\n- name: {{ .name }}\n  members: {{ .members -}}\n{{ end }}\n";
    let values = "etcd:\n- {name: main, members: [a1, b1]}\n- {name: events, members: [a1, b1]}\n";
    assert_eq!(
        render(tpl, values),
        "cluster:\n- name: main\n  members: [a1 b1]\n- name: events\n  members: [a1 b1]\n"
    );
}

#[test]
fn snippets_are_included() {
    let etcd = "{{- range .etcd -}}\n- name: {{ .name }}\n  members: {{ .members | join \",\" }}\n{{ end -}}\n";
    let values = "etcd:\n- {name: main, members: [a1, b1]}\n- {name: events, members: [a1, b1]}\n";
    let out = render_with(
        "cluster:\n{{ include \"cluster\" . -}}\n",
        values,
        &[("cluster", etcd)],
        true,
    )
    .unwrap();
    assert_eq!(
        out,
        "cluster:\n- name: main\n  members: a1,b1\n- name: events\n  members: a1,b1\n"
    );

    let unit = "[Unit]\nName: somename\n\n[Service]\nThis is a service\n";
    let tpl = "hooks:\n  name: myservice.service\n  manifest: |\n    {{ include \"unit\" . | indent 4 -}}\n";
    let out = render_with(tpl, "{}", &[("unit", unit)], true).unwrap();
    assert_eq!(
        out,
        "hooks:\n  name: myservice.service\n  manifest: |\n    [Unit]\n    Name: somename\n\n    [Service]\n    This is a service\n"
    );
    let out = render_with(
        "spec:\n  policy: {{ include \"p.json\" . | nindent 4 }}",
        "x: 1",
        &[("p.json", "{\n  \"x\": {{ .x }}\n}")],
        true,
    )
    .unwrap();
    assert_eq!(out, "spec:\n  policy: \n    {\n      \"x\": 1\n    }");
}

#[test]
fn sprig_functions() {
    let values = "ips: [1.2.3.4/32, 4.3.2.1/32]\nname: My-Cluster\nsize: 3\nm: {b: 1, a: [x]}\nk8s: 1.30.2\n";
    let cases = [
        ("{{ .ips | toJson }}", r#"["1.2.3.4/32","4.3.2.1/32"]"#),
        ("{{ .m | toJson }}", r#"{"a":["x"],"b":1}"#),
        ("{{ .m | toYaml }}", "a:\n- x\nb: 1"),
        ("{{ .name | lower | replace \"-\" \"_\" | quote }}", "\"my_cluster\""),
        ("{{ .name | trimSuffix \"-Cluster\" }}|{{ .name | trimPrefix \"My\" }}", "My|-Cluster"),
        ("{{ if contains \"Clu\" .name }}yes{{ end }}", "yes"),
        ("{{ default \"t3.medium\" .machineType }}", "t3.medium"),
        ("{{ .size | add 1 }} {{ sub .size 1 }} {{ mul .size 2 }} {{ div 7 2 }}", "4 2 6 3"),
        ("{{ \"a,b\" | split \",\" }}", "map[_0:a _1:b]"),
        ("{{ (split \".\" \"x.y.z\")._1 }}", "y"),
        ("{{ splitList \",\" \"a,b\" | join \"+\" }}", "a+b"),
        ("{{ \"hi\" | b64enc }} {{ \"aGk=\" | b64dec }}", "aGk= hi"),
        ("{{ list 1 \"a\" true }}", "[1 a true]"),
        ("{{ $d := dict \"k\" \"v\" \"n\" 2 }}{{ $d.k }}{{ $d.n }}{{ hasKey $d \"k\" }}{{ hasKey $d \"z\" }}", "v2truefalse"),
        ("{{ ternary \"on\" \"off\" true }}/{{ ternary \"on\" \"off\" false }}", "on/off"),
        ("{{ \"  x  \" | trim }}|", "x|"),
        ("{{ len .ips }} {{ index .ips 1 }} {{ index .m \"b\" }}", "2 4.3.2.1/32 1"),
        ("{{ printf \"%s-%d-%v-%05.1f\" .name 7 .size 2.5 }}", "My-Cluster-7-3-002.5"),
        ("{{ print \"a\" 1 2 \"b\" }}", "a1 2b"),
        ("{{ eq .size 3.0 }} {{ lt 1 2 }} {{ ge \"b\" \"a\" }} {{ ne .name \"x\" }}", "true true true true"),
        ("{{ $d := dict }}{{ $_ := set $d \"a\" 1 }}{{ $d.a }}", "1"),
        ("{{ keys .m | sortAlpha | join \",\" }}", "a,b"),
        ("{{ sha256sum \"abc\" | trunc 8 }}", "ba7816bf"),
        ("{{ first .ips }} {{ last .ips }} {{ has \"1.2.3.4/32\" .ips }}", "1.2.3.4/32 4.3.2.1/32 true"),
        ("{{ until 3 }} {{ seq 2 4 }}", "[0 1 2] 2 3 4"),
        ("{{ .name | upper | title }}", "MY-CLUSTER"),
        ("{{ coalesce .nope \"\" \"c\" }}", "c"),
        ("{{ if semverCompare \">=1.28\" .k8s }}new{{ else }}old{{ end }}", "new"),
    ];
    for (tpl, want) in cases {
        let got = render_with(tpl, values, &[], false).unwrap_or_else(|e| panic!("{tpl}: {e}"));
        assert_eq!(got, want, "template {tpl}");
    }
}

#[test]
fn missing_keys() {
    // Without --fail-on-missing, a missing key is Go's <no value> and defaults apply.
    assert_eq!(
        render_with("[{{ .nope }}]", "{}", &[], false).unwrap(),
        "[<no value>]"
    );
    assert_eq!(
        render_with("{{ default \"is missing\" .name }}", "{}", &[], false).unwrap(),
        "is missing"
    );
    assert_eq!(
        render_with("{{ .a.b.c }}", "{}", &[], false).unwrap(),
        "<no value>"
    );

    // With it, the error names the key and where the template asked for it.
    let err = render_with(
        "apiVersion: v1\nspec:\n  zone: {{ .awsRegion }}a\n",
        "{}",
        &[],
        true,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cluster.tmpl.yaml:3:"), "{msg}");
    assert!(
        msg.contains(r#"map has no entry for key "awsRegion""#),
        "{msg}"
    );
    assert!(msg.contains("<.awsRegion>"), "{msg}");

    let msg = render_with("a: {{ upper .region }}", "{}", &[], true)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("cluster.tmpl.yaml:1:")
            && msg.contains("<.region>")
            && msg.contains("\"region\""),
        "{msg}"
    );

    // Also inside an included snippet: the snippet is named.
    let err = render_with(
        "{{ .x }}{{ include \"snip\" . }}",
        "x: no",
        &[("snip", "line1\n{{ .is_missing }}")],
        true,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("snip:2:") && msg.contains("is_missing"),
        "{msg}"
    );
}

#[test]
fn errors_are_reported() {
    let parse = render_with("a\n{{ if .x }}", "{}", &[], true)
        .unwrap_err()
        .to_string();
    assert!(parse.contains("cluster.tmpl.yaml:2"), "{parse}");
    let undefined = render_with("{{ nosuchfunc 1 }}", "{}", &[], true)
        .unwrap_err()
        .to_string();
    assert!(
        undefined.contains(r#"function "nosuchfunc" not defined"#),
        "{undefined}"
    );
    let fail = render_with(
        "{{ required \"awsRegion is required\" .awsRegion }}",
        "{}",
        &[],
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(fail.contains("awsRegion is required"), "{fail}");
    let bad = render_with("{{ include \"nope\" . }}", "{}", &[], true)
        .unwrap_err()
        .to_string();
    assert!(bad.contains("nope"), "{bad}");
    let rec = render_with(
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
        "{}",
        &[],
        true,
    );
    assert!(rec.is_err());
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn toolbox_command_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let values_a = write(dir, "values-a.yaml", "instanceGroups:\n  foo:\n    ami: ami-1234567\n    type: m4.large\nallowedIPs: [1.2.3.4/32]\n");
    let values_b = write(
        dir,
        "values-b.yaml",
        "instanceGroups:\n  foo:\n    type: t2.large\n",
    );
    let cluster = write(
        dir,
        "cluster.yaml",
        "kind: Cluster\nmetadata:\n  name: {{ .clusterName }}\nspec:\n  kubernetesApiAccess: {{ .allowedIPs | toJson }}\n  docker:\n    {{ include \"docker\" . | indent 4 }}\n",
    );
    write(dir, "igs/10-foo.yaml", "kind: InstanceGroup\nspec:\n  image: {{ .instanceGroups.foo.ami }}\n  machineType: {{ .instanceGroups.foo.type }}\n  maxSize: {{ .max }}\n");
    write(
        dir,
        "snippets/components/docker",
        "logLevel: warn\nbridge: \"\"",
    );
    let opts = ToolboxOptions {
        templates: vec![cluster, dir.join("igs")],
        values: vec![values_a, values_b],
        set: vec!["max=5".into()],
        set_string: vec![],
        snippets: vec![dir.join("snippets")],
        fail_on_missing: true,
        format_yaml: false,
        cluster_name: Some("dev.example.com".into()),
    };
    let out = toolbox::run(&opts, &|_| {}).unwrap();
    assert_eq!(
        out,
        "kind: Cluster\nmetadata:\n  name: dev.example.com\nspec:\n  kubernetesApiAccess: [\"1.2.3.4/32\"]\n  docker:\n    logLevel: warn\n    bridge: \"\"\n---\nkind: InstanceGroup\nspec:\n  image: ami-1234567\n  machineType: t2.large\n  maxSize: 5\n"
    );

    let formatted = toolbox::run(
        &ToolboxOptions {
            format_yaml: true,
            ..opts.clone()
        },
        &|_| {},
    )
    .unwrap();
    assert_eq!(
        formatted,
        "kind: Cluster\nmetadata:\n  name: dev.example.com\nspec:\n  docker:\n    bridge: \"\"\n    logLevel: warn\n  kubernetesApiAccess:\n  - 1.2.3.4/32\n---\nkind: InstanceGroup\nspec:\n  image: ami-1234567\n  machineType: t2.large\n  maxSize: 5\n"
    );

    // --fail-on-missing names the template file and line.
    let broken = write(dir, "broken.yaml", "a: 1\nb: {{ .nothere }}\n");
    let err = toolbox::run(
        &ToolboxOptions {
            templates: vec![broken],
            ..opts.clone()
        },
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("broken.yaml:2:") && err.contains("nothere"),
        "{err}"
    );
}
