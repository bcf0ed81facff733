//! The tree sampler follows child processes as they come and go: new ones at the next discovery
//! (every `discover_every` samples), gone ones at the next sample.
#![cfg(target_os = "linux")]

use std::process::{Child, Command};

use jets_host::{SamplerOptions, TreeSampler};

fn sleeper() -> Child {
    Command::new("sleep").arg("30").spawn().expect("spawn sleep")
}

fn child_pids(s: &mut TreeSampler) -> Vec<u32> {
    s.sample().children.iter().map(|c| c.pid).collect()
}

#[test]
fn children_are_followed_as_they_come_and_go() {
    for discover_every in [1, 2] {
        let opts = SamplerOptions { discover_every, perf: false, ..Default::default() };
        let mut a = sleeper();
        let mut s = TreeSampler::new(std::process::id(), opts).expect("sampler");
        assert_eq!(child_pids(&mut s), [a.id()]);
        let mut b = sleeper();
        let mut found = child_pids(&mut s);
        if discover_every == 2 {
            assert_eq!(found, [a.id()], "no discovery at the second sample");
            found = child_pids(&mut s);
        }
        assert_eq!(found.len(), 2, "a new child is found at the next discovery");
        a.kill().expect("kill");
        a.wait().expect("reap");
        let tree = s.sample();
        assert_eq!(
            tree.children.iter().map(|c| c.pid).collect::<Vec<_>>(),
            [b.id()],
            "a reaped child is gone"
        );
        assert_eq!(tree.children[0].command, "sleep");
        let agg = tree.aggregated.expect("aggregated");
        assert_eq!(agg.process_count, 2);
        let parent_rss = tree.parent.expect("parent").mem_rss_kb;
        assert_eq!(agg.mem_rss_kb, parent_rss + tree.children[0].metrics.mem_rss_kb);
        b.kill().expect("kill");
        b.wait().expect("reap");
    }
}
