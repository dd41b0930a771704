//! Drift: whether the kernel's route of a managed prefix is still the one mproute installed (the
//! same paths, as sets, and the same weights). A route changed behind mproute's back is left to
//! the kernel by the dataplane until `mproute sync` settles it.

use std::net::IpAddr;

/// One path of a route: (device, gateway).
pub type Path = (u32, Option<IpAddr>);

/// A path for a message: `via GW (ifindex N)` or `dev ifindex N`.
fn path_text(n: &Path) -> String {
    match n.1 {
        Some(gw) => format!("via {gw} (ifindex {})", n.0),
        None => format!("dev ifindex {}", n.0),
    }
}

/// How the kernel's route's paths differ from the dataplane group's (compared as sets: the
/// order and the weights do not matter), if they do.
pub fn paths_differ(ours: &[Path], kernel: &[Path]) -> Option<String> {
    if let Some(n) = kernel.iter().find(|n| !ours.contains(n)) {
        return Some(format!(
            "the kernel's route has nexthop {}, not ours",
            path_text(n)
        ));
    }
    if let Some(n) = ours.iter().find(|n| !kernel.contains(n)) {
        return Some(format!(
            "the kernel's route lacks our nexthop {}",
            path_text(n)
        ));
    }
    None
}

/// Whether two routes' weighted paths differ, compared as sets of (path, weight); `None`
/// where either side's weights are unknown (empty).
pub fn weights_differ(ours: &[Path], ours_w: &[u16], kernel: &[Path], kernel_w: &[u16]) -> bool {
    if ours_w.len() != ours.len() || kernel_w.len() != kernel.len() {
        return false;
    }
    let mut a: Vec<(Path, u16)> = ours.iter().copied().zip(ours_w.iter().copied()).collect();
    let mut b: Vec<(Path, u16)> = kernel
        .iter()
        .copied()
        .zip(kernel_w.iter().copied())
        .collect();
    a.sort();
    b.sort();
    a != b
}

/// [`drift`], and then the weights ([`weights_differ`]): the whole of what makes a managed
/// route's kernel route another than the one mproute installed. `kernel`: its paths, their
/// weights and whether it uses a nexthop object (not compared).
pub fn drift_weighted(
    ours: &[Path],
    ours_w: &[u16],
    kernel: Option<(&[Path], &[u16], bool)>,
) -> Option<String> {
    drift(ours, kernel.map(|(p, _, obj)| (p, obj))).or_else(|| {
        kernel
            .filter(|(p, w, obj)| !*obj && weights_differ(ours, ours_w, p, w))
            .map(|_| "the kernel's route has other weights".to_string())
    })
}

/// Whether a managed route has drifted from the kernel's: its own FIB entry (same prefix,
/// table and metric; `None`: there is none) is gone, or has other paths than the dataplane's
/// group. Such a route is not the managed route any more, whoever changed it: the dataplane
/// leaves its packets to the kernel. Entries with a nexthop object (no paths in a dump) are
/// not compared.
pub fn drift(ours: &[Path], kernel: Option<(&[Path], bool)>) -> Option<String> {
    match kernel {
        None => Some("not in the kernel's FIB".into()),
        Some((_, true)) => None,
        Some((paths, false)) => paths_differ(ours, paths),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E1: u32 = 3;
    const E2: u32 = 4;

    fn gw(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("address"))
    }

    fn nhs() -> Vec<(u32, Option<IpAddr>)> {
        vec![(E1, gw("10.1.0.2")), (E2, gw("10.2.0.2"))]
    }

    #[test]
    fn drift_weighted_is_drift_then_weights() {
        let ours = nhs();
        assert_eq!(
            drift_weighted(&ours, &[1, 1], Some((&ours, &[1, 1], false))),
            None
        );
        let w = drift_weighted(&ours, &[1, 1], Some((&ours, &[2, 1], false))).unwrap_or_default();
        assert!(w.contains("other weights"), "{w}");
        assert_eq!(
            drift_weighted(&ours, &[1, 1], Some((&ours, &[2, 1], true))),
            None
        );
        let gone = drift_weighted(&ours, &[1, 1], None).unwrap_or_default();
        assert!(gone.contains("not in the kernel's FIB"), "{gone}");
    }

    #[test]
    fn weights_differ_as_sets_of_weighted_paths() {
        let ours = nhs();
        let mut rev = nhs();
        rev.reverse();
        assert!(
            !weights_differ(&ours, &[3, 1], &rev, &[1, 3]),
            "same, other order"
        );
        assert!(weights_differ(&ours, &[3, 1], &ours, &[1, 1]));
        assert!(
            !weights_differ(&ours, &[3, 1], &ours, &[]),
            "unknown: not compared"
        );
    }

    #[test]
    fn drift_is_a_gone_route_or_other_paths_in_any_order() {
        let ours = nhs();
        let mut reversed = nhs();
        reversed.reverse();
        assert_eq!(drift(&ours, Some((&reversed, false))), None);
        // a nexthop object's paths are not in the dump: not compared
        assert_eq!(drift(&ours, Some((&[], true))), None);
        let gone = drift(&ours, None).unwrap_or_default();
        assert!(gone.contains("not in the kernel's FIB"), "{gone}");
        let fewer = drift(&ours, Some((&ours[..1], false))).unwrap_or_default();
        assert!(fewer.contains("lacks our nexthop via"), "{fewer}");
        let other = vec![ours[0], (E1, gw("10.1.0.99"))];
        let why = drift(&ours, Some((&other, false))).unwrap_or_default();
        assert!(why.contains("has nexthop via 10.1.0.99"), "{why}");
        let more = vec![ours[0], ours[1], (E2, gw("10.2.0.9"))];
        assert!(drift(&ours, Some((&more, false))).is_some());
    }
}
