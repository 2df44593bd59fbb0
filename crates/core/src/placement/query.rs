//! Placement's query strings for `GET /allocation_candidates` and `GET /resource_providers`,
//! parsed into request groups with Placement's rules and its 400 answers.

use std::collections::{BTreeMap, BTreeSet};

use super::microversion::Microversion;
use super::{check_resource_class, check_trait, is_uuid_like};

/// A malformed query: Placement answers these with 400 Bad Request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct QueryError {
    pub detail: String,
    /// What Placement's answer says is wrong, in its `code` (from 1.23).
    pub code: QueryErrorCode,
}

/// The error codes Placement gives a malformed query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryErrorCode {
    /// No code of its own (`placement.undefined_code`).
    #[default]
    Undefined,
    /// A value that cannot be taken (`placement.query.bad_value`).
    BadValue,
    /// A value the query needs and lacks (`placement.query.missing_value`).
    MissingValue,
    /// A parameter given more than once that may be given once (`placement.query.duplicate_key`).
    DuplicateKey,
}

impl QueryErrorCode {
    /// Placement's code.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryErrorCode::Undefined => "placement.undefined_code",
            QueryErrorCode::BadValue => "placement.query.bad_value",
            QueryErrorCode::MissingValue => "placement.query.missing_value",
            QueryErrorCode::DuplicateKey => "placement.query.duplicate_key",
        }
    }
}

fn bad(detail: impl Into<String>) -> QueryError {
    QueryError {
        detail: detail.into(),
        code: QueryErrorCode::Undefined,
    }
}

impl QueryError {
    fn coded(mut self, code: QueryErrorCode) -> QueryError {
        self.code = code;
        self
    }
}

/// `none` or `isolate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    None,
    Isolate,
}

/// One request group of a query; the unnumbered group has an empty suffix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupQuery {
    pub suffix: String,
    /// Whether one provider must satisfy the whole group (every suffixed group).
    pub use_same_provider: bool,
    pub resources: BTreeMap<String, i64>,
    /// Required traits: each set is satisfied by any one of its traits (`in:`); all sets must be.
    pub required: Vec<BTreeSet<String>>,
    pub forbidden: BTreeSet<String>,
    /// Aggregates: each set is satisfied by membership in any one of them.
    pub member_of: Vec<BTreeSet<String>>,
    pub forbidden_aggregates: BTreeSet<String>,
    pub in_tree: Option<String>,
}

/// A whole `GET /allocation_candidates` query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidatesQuery {
    pub microversion: Microversion,
    /// Groups by suffix; the unnumbered group, when present, is under "".
    pub groups: BTreeMap<String, GroupQuery>,
    pub group_policy: Option<GroupPolicy>,
    pub limit: Option<usize>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    pub same_subtrees: Vec<BTreeSet<String>>,
}

/// A `GET /resource_providers` query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvidersQuery {
    pub microversion: Microversion,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub filters: GroupQuery,
}

/// Splits a query string into decoded `(key, value)` pairs, in order.
pub fn decode_pairs(query: &str) -> Result<Vec<(String, String)>, QueryError> {
    let query = query.strip_prefix('?').unwrap_or(query);
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Result<String, QueryError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3).ok_or_else(|| {
                    bad(format!("query string has a bad escape near {:?}", &s[i..]))
                })?;
                // Two hex digits exactly: `from_str_radix` alone would take a sign (`%+1`).
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(format!("query string has a bad escape %{hex}")));
                }
                let b = u8::from_str_radix(hex, 16)
                    .map_err(|_| bad(format!("query string has a bad escape %{hex}")))?;
                out.push(b);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| bad("query string is not UTF-8 after decoding"))
}

/// The group prefixes and where a suffix starts.
const GROUP_PREFIXES: [&str; 4] = ["resources", "required", "member_of", "in_tree"];

fn group_key(key: &str, mv: Microversion) -> Option<(&'static str, &str)> {
    for prefix in GROUP_PREFIXES {
        if let Some(suffix) = key.strip_prefix(prefix) {
            let ok = suffix.is_empty()
                || if mv.at_least(33) {
                    suffix.len() <= 64
                        && suffix
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                } else {
                    suffix.starts_with(|c: char| ('1'..='9').contains(&c))
                        && suffix.bytes().all(|b| b.is_ascii_digit())
                };
            if ok {
                return Some((prefix, suffix));
            }
        }
    }
    None
}

/// Parses `resources=VCPU:2,MEMORY_MB:1024`.
pub(crate) fn parse_resources(value: &str) -> Result<BTreeMap<String, i64>, QueryError> {
    if value.trim().is_empty() {
        return Err(bad(
            "resources is empty; write it as resources=VCPU:2,MEMORY_MB:1024",
        ));
    }
    let mut out = BTreeMap::new();
    for item in value.split(',') {
        let mut parts = item.split(':');
        let (Some(class), Some(amount), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(format!(
                "resources entry {item:?} is not CLASS:AMOUNT; write it as resources=VCPU:2,MEMORY_MB:1024"
            )));
        };
        let amount: i64 = amount.trim().parse().map_err(|_| {
            bad(format!(
                "resource {class} asks for {amount:?}, which is not a whole number"
            ))
        })?;
        if amount < 1 {
            return Err(bad(format!(
                "resource {class} asks for {amount}; amounts are at least 1"
            )));
        }
        check_resource_class(class)
            .map_err(|e| bad(format!("bad resource class in resources: {e}")))?;
        out.insert(class.to_string(), amount);
    }
    Ok(out)
}

/// Parses one `required` value: `A,!B` or (1.39+) `in:A,B`.
fn parse_required(
    value: &str,
    mv: Microversion,
) -> Result<(Vec<BTreeSet<String>>, BTreeSet<String>), QueryError> {
    if let Some(list) = value.strip_prefix("in:") {
        if !mv.at_least(39) {
            return Err(bad(format!(
                "required={value}: the in: form needs microversion 1.39 or later"
            )));
        }
        let any: BTreeSet<String> = list.split(',').map(|t| t.trim().to_string()).collect();
        if any.iter().any(String::is_empty) {
            return Err(bad(format!("required={value} has an empty trait name")));
        }
        if any.iter().any(|t| t.starts_with('!')) {
            return Err(bad(format!(
                "required={value}: traits in an in: list cannot be forbidden with !"
            )));
        }
        for t in &any {
            check_trait(t).map_err(|e| bad(format!("required: {e}")))?;
        }
        return Ok((vec![any], BTreeSet::new()));
    }
    let mut required = Vec::new();
    let mut forbidden = BTreeSet::new();
    for raw in value.split(',') {
        let item = raw.trim();
        let name = item.trim_start_matches('!');
        if name.is_empty() {
            return Err(bad(format!("required={value} has an empty trait name")));
        }
        if item.starts_with('!') {
            if !mv.at_least(22) {
                return Err(bad(format!(
                    "required={value}: forbidding a trait with ! needs microversion 1.22 or later"
                )));
            }
            check_trait(name).map_err(|e| bad(format!("required: {e} (no space may follow !)")))?;
            forbidden.insert(name.to_string());
        } else {
            check_trait(name).map_err(|e| bad(format!("required: {e}")))?;
            required.push(BTreeSet::from([name.to_string()]));
        }
    }
    Ok((required, forbidden))
}

/// Parses one `member_of` value: `AGG`, `in:A,B`, `!AGG`, `!in:A,B`.
fn parse_member_of(value: &str) -> Result<(BTreeSet<String>, BTreeSet<String>), QueryError> {
    if value.contains(',') && !(value.starts_with("in:") || value.starts_with("!in:")) {
        return Err(bad(format!(
            "member_of={value}: several aggregates need the in: (or !in:) prefix"
        )));
    }
    let (forbid, list) = if let Some(l) = value.strip_prefix("!in:") {
        (true, l)
    } else if let Some(l) = value.strip_prefix('!') {
        (true, l)
    } else if let Some(l) = value.strip_prefix("in:") {
        (false, l)
    } else {
        (false, value)
    };
    let aggs: BTreeSet<String> = list.split(',').map(str::to_string).collect();
    if let Some(badone) = aggs.iter().find(|a| !is_uuid_like(a)) {
        return Err(bad(format!(
            "member_of: {badone:?} is not an aggregate uuid"
        )));
    }
    Ok(if forbid {
        (BTreeSet::new(), aggs)
    } else {
        (aggs, BTreeSet::new())
    })
}

/// Checks every parameter name against the microversion; unknown ones are errors.
fn check_allowed(key: &str, mv: Microversion, allowed: &[(&str, u16)]) -> Result<(), QueryError> {
    match allowed.iter().find(|(k, _)| *k == key) {
        Some((_, since)) if mv.at_least(*since) => Ok(()),
        Some((_, since)) => Err(bad(format!(
            "parameter {key} needs microversion 1.{since} or later; this request is at {mv}"
        ))),
        None => Err(bad(format!(
            "parameter {key:?} is not understood at microversion {mv}"
        ))),
    }
}

/// Fills one group from a prefixed parameter; every value of a repeated key counts where
/// Placement lets it (`required` from 1.39, `member_of` from 1.24), else the last one.
fn apply_group_param(
    group: &mut GroupQuery,
    prefix: &str,
    key: &str,
    values: &[&str],
    mv: Microversion,
) -> Result<(), QueryError> {
    let last = values.last().copied().unwrap_or("");
    match prefix {
        "resources" => group.resources = parse_resources(last)?,
        "required" => {
            let used: &[&str] = if mv.at_least(39) {
                values
            } else {
                &values[values.len() - 1..]
            };
            group.required.clear();
            group.forbidden.clear();
            for v in used {
                let (r, f) = parse_required(v, mv)?;
                group.required.extend(r);
                group.forbidden.extend(f);
            }
        }
        "member_of" => {
            if values.len() > 1 && !mv.at_least(24) {
                return Err(bad(format!(
                    "{key} may be given only once before microversion 1.24"
                )));
            }
            group.member_of.clear();
            group.forbidden_aggregates.clear();
            for v in values {
                let (r, f) = parse_member_of(v)?;
                if !f.is_empty() && !mv.at_least(32) {
                    return Err(bad(format!(
                        "{key}: forbidding aggregates with ! needs microversion 1.32 or later"
                    )));
                }
                if !r.is_empty() {
                    group.member_of.push(r);
                }
                group.forbidden_aggregates.extend(f);
            }
        }
        _ => {
            let v = last.trim();
            if !is_uuid_like(v) {
                return Err(bad(format!("{key}: {last:?} is not a provider uuid")));
            }
            group.in_tree = Some(v.to_string());
        }
    }
    Ok(())
}

/// Values per key in first-seen key order.
fn grouped(pairs: &[(String, String)]) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for (k, v) in pairs {
        match out.iter_mut().find(|(key, _)| key == k) {
            Some((_, vs)) => vs.push(v),
            None => out.push((k, vec![v])),
        }
    }
    out
}

/// Parses a `GET /allocation_candidates` query string.
pub fn parse_candidates_query(
    query: &str,
    mv: Microversion,
) -> Result<CandidatesQuery, QueryError> {
    let pairs = decode_pairs(query)?;
    let mut parsed = CandidatesQuery {
        microversion: mv,
        groups: BTreeMap::new(),
        group_policy: None,
        limit: None,
        root_required: BTreeSet::new(),
        root_forbidden: BTreeSet::new(),
        same_subtrees: Vec::new(),
    };
    for (key, values) in grouped(&pairs) {
        match group_key(key, mv) {
            Some((prefix, suffix)) => {
                apply_group_key(&mut parsed.groups, prefix, suffix, key, &values, mv)?
            }
            None => apply_wide_key(&mut parsed, key, &values, mv)?,
        }
    }
    check_unnumbered_resources(&parsed.groups, mv)?;
    if mv.at_least(36) {
        check_resourceless_in_subtrees(&parsed.groups, &parsed.same_subtrees)?;
    } else {
        check_every_group_has_resources(&parsed.groups)?;
    }
    check_trait_conflicts(&parsed.groups)?;
    check_group_policy(&parsed)?;
    Ok(parsed)
}

/// Parameters that span the whole query, with the microversion each arrived in.
const WIDE_PARAMS: [(&str, u16); 4] = [
    ("limit", 16),
    ("group_policy", 25),
    ("root_required", 35),
    ("same_subtree", 36),
];

/// A group parameter (`resources`, `required`, `member_of`, `in_tree`, maybe suffixed) into its group.
fn apply_group_key(
    groups: &mut BTreeMap<String, GroupQuery>,
    prefix: &str,
    suffix: &str,
    key: &str,
    values: &[&str],
    mv: Microversion,
) -> Result<(), QueryError> {
    let since = match prefix {
        "resources" => 10,
        "required" => 17,
        "member_of" => 21,
        _ => 31,
    };
    check_allowed(prefix, mv, &[(prefix, since)])?;
    if !suffix.is_empty() && !mv.at_least(25) {
        return Err(bad(format!(
            "parameter {key} (a numbered group) needs microversion 1.25 or later"
        )));
    }
    let group = groups
        .entry(suffix.to_string())
        .or_insert_with(|| GroupQuery {
            suffix: suffix.to_string(),
            use_same_provider: !suffix.is_empty(),
            ..Default::default()
        });
    apply_group_param(group, prefix, key, values, mv)
}

/// A query-wide parameter (`limit`, `group_policy`, `root_required`, `same_subtree`).
fn apply_wide_key(
    parsed: &mut CandidatesQuery,
    key: &str,
    values: &[&str],
    mv: Microversion,
) -> Result<(), QueryError> {
    check_allowed(key, mv, &WIDE_PARAMS)?;
    let last = *values.last().unwrap_or(&"");
    match key {
        // Placement validates the last `limit` and keeps the first.
        "limit" => {
            parse_limit(last)?;
            parsed.limit = Some(parse_limit(values.first().copied().unwrap_or(last))?);
        }
        // Likewise `group_policy`: the last is validated, the first taken.
        "group_policy" => {
            parse_group_policy(last)?;
            let first = values.first().copied().unwrap_or(last);
            parsed.group_policy = Some(parse_group_policy(first)?);
        }
        "root_required" => {
            (parsed.root_required, parsed.root_forbidden) = parse_root_required(values, mv)?
        }
        _ => parsed.same_subtrees.extend(parse_same_subtrees(values)?),
    }
    Ok(())
}

/// `limit`: a whole number of 1 or more, without sign or leading zero.
fn parse_limit(last: &str) -> Result<usize, QueryError> {
    let ok = last.starts_with(|c: char| ('1'..='9').contains(&c))
        && last.bytes().all(|b| b.is_ascii_digit());
    last.parse()
        .ok()
        .filter(|_| ok)
        .ok_or_else(|| bad(format!("limit={last:?} is not a whole number of 1 or more")))
}

/// `group_policy`: `none` or `isolate`.
fn parse_group_policy(last: &str) -> Result<GroupPolicy, QueryError> {
    match last {
        "none" => Ok(GroupPolicy::None),
        "isolate" => Ok(GroupPolicy::Isolate),
        _ => Err(bad(format!("group_policy={last:?}; use none or isolate"))),
    }
}

/// `root_required`: given once, traits to require and (`!`) to forbid, never both for one trait.
fn parse_root_required(
    values: &[&str],
    mv: Microversion,
) -> Result<(BTreeSet<String>, BTreeSet<String>), QueryError> {
    let last = *values.last().unwrap_or(&"");
    if values.len() > 1 {
        return Err(bad("root_required may be given only once").coded(QueryErrorCode::DuplicateKey));
    }
    if last.starts_with("in:") {
        return Err(bad(
            "root_required does not take the in: form; list the traits, ! to forbid one",
        ));
    }
    let (required, forbidden) = parse_required(last, mv)?;
    let required: BTreeSet<String> = required.into_iter().flatten().collect();
    if let Some(both) = required.intersection(&forbidden).next() {
        return Err(bad(format!(
            "root_required has {both} both required and forbidden"
        ))
        .coded(QueryErrorCode::BadValue));
    }
    Ok((required, forbidden))
}

/// `same_subtree`: each value a set of group suffixes, none of them the unnumbered group.
fn parse_same_subtrees(values: &[&str]) -> Result<Vec<BTreeSet<String>>, QueryError> {
    let mut out = Vec::new();
    for v in values {
        let set: BTreeSet<String> = v.split(',').map(|s| s.trim().to_string()).collect();
        if set.contains("") {
            return Err(bad(format!(
                "same_subtree={v} names the unnumbered group (an empty suffix); list only suffixes"
            ))
            .coded(QueryErrorCode::BadValue));
        }
        out.push(set);
    }
    Ok(out)
}

/// Before 1.25 the unnumbered `resources` is required.
fn check_unnumbered_resources(
    groups: &BTreeMap<String, GroupQuery>,
    mv: Microversion,
) -> Result<(), QueryError> {
    if !mv.at_least(25) && !groups.contains_key("") {
        return Err(bad("the resources parameter is required"));
    }
    Ok(())
}

/// From 1.36 a group may lack resources if same_subtree names it, and same_subtree names only groups.
fn check_resourceless_in_subtrees(
    groups: &BTreeMap<String, GroupQuery>,
    same_subtrees: &[BTreeSet<String>],
) -> Result<(), QueryError> {
    let resourceless: Vec<&String> = groups
        .iter()
        .filter(|(_, g)| g.resources.is_empty())
        .map(|(s, _)| s)
        .collect();
    if resourceless.len() == groups.len() {
        return Err(
            bad("give at least one resources or resources{suffix} parameter")
                .coded(QueryErrorCode::MissingValue),
        );
    }
    let in_subtrees: BTreeSet<&String> = same_subtrees.iter().flatten().collect();
    let loose: Vec<&String> = resourceless
        .iter()
        .copied()
        .filter(|s| !in_subtrees.contains(s))
        .collect();
    if !loose.is_empty() {
        return Err(bad(format!(
            "groups without resources must be named in same_subtree: {}",
            loose
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .coded(QueryErrorCode::BadValue));
    }
    let unknown: Vec<&&String> = in_subtrees
        .iter()
        .filter(|s| !groups.contains_key(s.as_str()))
        .collect();
    if !unknown.is_empty() {
        return Err(bad(format!(
            "same_subtree names suffixes no group has: {}",
            unknown
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .coded(QueryErrorCode::BadValue));
    }
    Ok(())
}

/// Before 1.36 every group needs resources; traits and aggregates without them are named first.
fn check_every_group_has_resources(
    groups: &BTreeMap<String, GroupQuery>,
) -> Result<(), QueryError> {
    let orphans: Vec<String> = groups
        .values()
        .filter(|g| g.resources.is_empty() && !g.required.is_empty())
        .map(|g| format!("required{}", g.suffix))
        .collect();
    if !orphans.is_empty() {
        return Err(bad(format!(
            "traits must come with resources in the same group: {} has none",
            orphans.join(", ")
        )));
    }
    let orphans: Vec<String> = groups
        .values()
        .filter(|g| {
            g.resources.is_empty()
                && (!g.member_of.is_empty() || !g.forbidden_aggregates.is_empty())
        })
        .map(|g| format!("member_of{}", g.suffix))
        .collect();
    if !orphans.is_empty() {
        return Err(bad(format!(
            "member_of must come with resources in the same group: {} has none",
            orphans.join(", ")
        )));
    }
    if groups.values().any(|g| g.resources.is_empty()) {
        return Err(bad("every request group needs resources"));
    }
    if groups.is_empty() {
        return Err(bad(
            "give at least one resources or resources{suffix} parameter",
        ));
    }
    Ok(())
}

/// A required trait set whose every trait the same group forbids can never be met.
fn check_trait_conflicts(groups: &BTreeMap<String, GroupQuery>) -> Result<(), QueryError> {
    let mut conflicts: Vec<String> = Vec::new();
    for g in groups.values() {
        for any in &g.required {
            if any.iter().all(|t| g.forbidden.contains(t)) {
                conflicts.push(format!(
                    "required{}: {}",
                    g.suffix,
                    any.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        return Err(bad(format!(
            "traits both required and forbidden in {}",
            conflicts.join("; ")
        )));
    }
    Ok(())
}

/// More than one numbered group needs a group_policy.
fn check_group_policy(parsed: &CandidatesQuery) -> Result<(), QueryError> {
    let numbered = parsed
        .groups
        .values()
        .filter(|g| g.use_same_provider)
        .count();
    if parsed.group_policy.is_none() && numbered > 1 {
        return Err(bad(
            "group_policy (none or isolate) is required with more than one numbered group",
        ));
    }
    Ok(())
}

/// Parses a `GET /resource_providers` query string.
pub fn parse_providers_query(query: &str, mv: Microversion) -> Result<ProvidersQuery, QueryError> {
    let pairs = decode_pairs(query)?;
    let mut parsed = ProvidersQuery {
        microversion: mv,
        name: None,
        uuid: None,
        filters: GroupQuery::default(),
    };
    let allowed: [(&str, u16); 6] = [
        ("name", 0),
        ("uuid", 0),
        ("member_of", 3),
        ("resources", 4),
        ("in_tree", 14),
        ("required", 18),
    ];
    for (key, values) in grouped(&pairs) {
        check_allowed(key, mv, &allowed)?;
        let last = *values.last().unwrap_or(&"");
        match key {
            "name" => parsed.name = Some(last.to_string()),
            "uuid" => {
                if !is_uuid_like(last) {
                    return Err(bad(format!("uuid={last:?} is not a uuid")));
                }
                parsed.uuid = Some(last.to_string());
            }
            _ => apply_group_param(&mut parsed.filters, key, key, &values, mv)?,
        }
    }
    // Unlike allocation candidates, a trait both required and forbidden is no error here:
    // Placement simply finds no provider.
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MV: Microversion = Microversion(39);

    fn err(q: &str) -> String {
        parse_candidates_query(q, MV).unwrap_err().detail
    }

    #[test]
    fn parses_groups_traits_and_policy() {
        let q = parse_candidates_query(
            "resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2,!CUSTOM_GOLD&required=in:CUSTOM_A,CUSTOM_B\
             &resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_A&member_of1=in:6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01,6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a02\
             &group_policy=isolate&limit=5",
            MV,
        )
        .unwrap();
        let u = &q.groups[""];
        assert!(!u.use_same_provider);
        assert_eq!(u.resources["MEMORY_MB"], 512);
        assert_eq!(u.required.len(), 2);
        assert!(u.forbidden.contains("CUSTOM_GOLD"));
        let g = &q.groups["1"];
        assert!(g.use_same_provider);
        assert_eq!(g.member_of[0].len(), 2);
        assert_eq!(q.group_policy, Some(GroupPolicy::Isolate));
        assert_eq!(q.limit, Some(5));
    }

    #[test]
    fn placement_parsing_quirks() {
        // `!!T` means `!T`; spaces around an entry are stripped.
        let q = parse_candidates_query(
            "resources=VCPU:1&required=!!CUSTOM_GOLD, HW_CPU_X86_AVX2 ",
            MV,
        )
        .unwrap();
        assert!(q.groups[""].forbidden.contains("CUSTOM_GOLD"));
        assert_eq!(
            q.groups[""].required,
            vec![BTreeSet::from(["HW_CPU_X86_AVX2".to_string()])]
        );
        // in:A,B together with !A is legal.
        assert!(
            parse_candidates_query(
                "resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B&required=!CUSTOM_A",
                MV
            )
            .is_ok()
        );
        // Before 1.39 only the last `required` counts.
        let q = parse_candidates_query(
            "resources=VCPU:1&required=CUSTOM_A&required=CUSTOM_B",
            Microversion(38),
        )
        .unwrap();
        assert_eq!(
            q.groups[""].required,
            vec![BTreeSet::from(["CUSTOM_B".to_string()])]
        );
    }

    #[test]
    fn placement_400s() {
        assert!(
            err("resources=VCPU:1&required=CUSTOM_A,!CUSTOM_A")
                .contains("both required and forbidden")
        );
        assert!(err("resources=VCPU:1&required=! CUSTOM_A").contains("no space may follow !"));
        assert!(err("resources=VCPU:1&required=CUSTOM_A,,CUSTOM_B").contains("empty trait name"));
        assert!(err("resources=VCPU:1&required=HW_CPU_X86_AVX3").contains("did you mean"));
        assert!(err("resources=VCPU:1,BOGUS:1").contains("resource class \"BOGUS\""));
        assert!(err("resources=VCPU:0").contains("at least 1"));
        assert!(err("resources=VCPU").contains("CLASS:AMOUNT"));
        assert!(err("resources1=VCPU:1&resources2=VCPU:1").contains("group_policy"));
        assert!(err("resources=VCPU:1&limit=0").contains("limit"));
        let first = parse_candidates_query("resources=VCPU:1&limit=1&limit=3", MV).unwrap();
        assert_eq!(
            first.limit,
            Some(1),
            "a repeated limit keeps the first value"
        );
        assert!(err("resources=VCPU:1&bogus=1").contains("\"bogus\" is not understood"));
        assert!(err("resources=VCPU:1&required1=CUSTOM_A").contains("same_subtree"));
        assert_eq!(
            parse_candidates_query("resources=VCPU:1&required1=CUSTOM_A", Microversion(35))
                .unwrap_err()
                .detail,
            "traits must come with resources in the same group: required1 has none"
        );
        assert!(
            parse_candidates_query("resources=VCPU:1&required=!CUSTOM_A", Microversion(21))
                .unwrap_err()
                .detail
                .contains("1.22")
        );
        assert!(
            parse_candidates_query("resources=VCPU:1&required=in:CUSTOM_A", Microversion(38))
                .unwrap_err()
                .detail
                .contains("1.39")
        );
        assert!(
            parse_candidates_query("resources_X=VCPU:1", Microversion(32))
                .unwrap_err()
                .detail
                .contains("not understood")
        );
        assert!(parse_candidates_query("resources_X=VCPU:1", Microversion(33)).is_ok());
        assert!(err("resources=VCPU:1&member_of=a,b").contains("in:"));
        assert!(err("resources=VCPU:1&member_of=nope").contains("not an aggregate uuid"));
        assert!(
            parse_candidates_query(
                "resources=VCPU:1&member_of=!6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01",
                Microversion(31)
            )
            .unwrap_err()
            .detail
            .contains("1.32")
        );
    }

    #[test]
    fn percent_decoding() {
        let q = parse_candidates_query("resources=VCPU%3A1&required=%21CUSTOM_GOLD", MV).unwrap();
        assert_eq!(q.groups[""].resources["VCPU"], 1);
        assert!(q.groups[""].forbidden.contains("CUSTOM_GOLD"));
    }

    #[test]
    fn an_escape_is_two_hex_digits_without_a_sign() {
        assert_eq!(
            decode_pairs("a=%2B%2b").unwrap(),
            [("a".into(), "++".into())]
        );
        for bad in ["a=%+1", "a=%-1", "a=%1", "a=%g0", "a=%é"] {
            let e = decode_pairs(bad).unwrap_err();
            assert!(e.detail.contains("bad escape"), "{bad}: {}", e.detail);
        }
    }

    #[test]
    fn providers_query() {
        let q = parse_providers_query(
            "resources=VCPU:1&required=!CUSTOM_GOLD&in_tree=6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01",
            MV,
        )
        .unwrap();
        assert!(q.filters.forbidden.contains("CUSTOM_GOLD"));
        assert!(parse_providers_query("required=CUSTOM_A", Microversion(17)).is_err());
        assert!(parse_providers_query("limit=1", MV).is_err());
        assert!(parse_providers_query("required=CUSTOM_A,!CUSTOM_A", MV).is_ok());
    }
}
