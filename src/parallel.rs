//! Work spread over a few threads, for the many small syscalls of reading
//! and writing a thousand disks: results in order, a panic an error.

use std::sync::Mutex;

/// A panic in the work: a bug, reported as an error rather than taking
/// down the run (a udev worker's included) with it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Panicked(pub String);

/// `f` over `work` on up to `threads` (at most 8) threads, in order. A
/// panic in `f` is caught and returned as [`Panicked`]; nothing else
/// of the result is kept. The threads take the work a block at a time,
/// as each is free: a thread slowed by the rest of the machine does not
/// hold the others up with a fixed share of it.
pub fn map<T: Send, R: Send>(
    work: Vec<T>,
    threads: usize,
    f: impl Fn(T) -> R + Sync,
) -> Result<Vec<R>, Panicked> {
    const PER_THREAD_MIN: usize = 64;
    const BLOCK: usize = 16;
    let threads = threads
        .min(8)
        .min(work.len().div_ceil(PER_THREAD_MIN))
        .max(1);
    let run = |block: Vec<T>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block.into_iter().map(&f).collect::<Vec<_>>()
        }))
        .map_err(|p| Panicked(panic_message(p.as_ref())))
    };
    if threads == 1 {
        return run(work);
    }
    let mut blocks = Vec::new();
    let mut rest = work;
    while rest.len() > BLOCK {
        let tail = rest.split_off(BLOCK);
        blocks.push(rest);
        rest = tail;
    }
    blocks.push(rest);
    let count = blocks.len();
    let todo = Mutex::new(blocks.into_iter().enumerate());
    let worker = || {
        let mut done = Vec::new();
        loop {
            // nothing panics while holding the lock (`run` is called after)
            let next = todo.lock().unwrap_or_else(|p| p.into_inner()).next();
            let Some((i, block)) = next else {
                return Ok(done);
            };
            done.push((i, run(block)?));
        }
    };
    // each thread's blocks, by block index
    type Done<R> = Result<Vec<(usize, Vec<R>)>, Panicked>;
    let per_thread: Vec<Done<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        handles
            .into_iter()
            .map(|h| {
                // `run` catches every panic of `f`; one in `join`'s thread
                // itself (spawn's bookkeeping) is reported the same way.
                h.join()
                    .unwrap_or_else(|p| Err(Panicked(panic_message(p.as_ref()))))
            })
            .collect()
    });
    let mut done = Vec::with_capacity(count);
    for part in per_thread {
        done.extend(part?);
    }
    done.sort_unstable_by_key(|(i, _)| *i);
    Ok(done.into_iter().flat_map(|(_, r)| r).collect())
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_an_error_not_an_abort() {
        for threads in [1, 4] {
            let work: Vec<u32> = (0..1000).collect();
            let got = map(work, threads, |n| {
                assert!(n != 700, "item {n} is odd");
                n
            });
            let err = got.expect_err("the panic is reported");
            assert!(err.to_string().contains("item 700 is odd"), "{err}");
        }
    }

    #[test]
    fn the_order_is_kept() {
        for threads in [1, 3, 8] {
            let work: Vec<u32> = (0..1000).collect();
            let got = map(work.clone(), threads, |n| n * 2).expect("no panic");
            assert_eq!(got, work.iter().map(|n| n * 2).collect::<Vec<_>>());
        }
        assert!(map(Vec::<u32>::new(), 4, |n| n).is_ok_and(|v| v.is_empty()));
    }
}
