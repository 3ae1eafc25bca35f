//! A bounded cache of HTTP responses per check, honouring `Cache-Control: max-age`, with one request in
//! flight per URL: 2,000 objects waiting on the same dependency cost one request per freshness period, not
//! 2,000 per requeue round.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A response kept whole (bodies are capped by the policy before they get here).
#[derive(Debug, Clone)]
pub(crate) struct StoredResponse {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

struct Entry {
    response: StoredResponse,
    expires: Instant,
}

/// Responses by URL, at most `capacity` of them.
pub(crate) struct ResponseCache {
    capacity: usize,
    entries: Mutex<HashMap<String, Entry>>,
    /// URLs being fetched: a second evaluation asking for one waits for the first instead of sending again.
    in_flight: Arc<InFlight>,
}

type InFlight = Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;

/// Held while fetching a URL; others asking for it wait until it is dropped (also when the fetching
/// evaluation is cut off by its deadline), and the next miss then starts a new fetch.
pub(crate) struct FetchTurn {
    url: String,
    in_flight: Arc<InFlight>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for FetchTurn {
    fn drop(&mut self) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.url);
    }
}

impl ResponseCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(HashMap::new()),
            in_flight: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A fresh response for `url`, if any.
    pub fn get(&self, url: &str) -> Option<StoredResponse> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(url)
            .filter(|entry| entry.expires > Instant::now())
            .map(|entry| entry.response.clone())
    }

    /// A fresh response for `url`, waiting first for a fetch of it already under way; otherwise the turn to
    /// fetch it (others then wait for this one). A waiter that still finds nothing fetches on its own.
    pub async fn get_or_turn(&self, url: &str) -> Result<StoredResponse, Option<FetchTurn>> {
        if let Some(hit) = self.get(url) {
            return Ok(hit);
        }
        let (gate, leader) = {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match in_flight.get(url) {
                Some(gate) => (Arc::clone(gate), None),
                None => {
                    let gate = Arc::new(tokio::sync::Mutex::new(()));
                    let turn = Arc::clone(&gate).try_lock_owned().ok();
                    in_flight.insert(url.to_owned(), Arc::clone(&gate));
                    (gate, turn)
                }
            }
        };
        if let Some(turn) = leader {
            return Err(Some(FetchTurn {
                url: url.to_owned(),
                in_flight: Arc::clone(&self.in_flight),
                _turn: turn,
            }));
        }
        drop(gate.lock().await);
        self.get(url).ok_or(None)
    }

    /// Keeps `response` for `url` when its headers allow it: an explicit `max-age` > 0 and no `no-store`,
    /// `no-cache` or `Vary` (the cache key is the URL alone), and not a server error.
    pub fn store(&self, url: &str, response: &StoredResponse) {
        let Some(max_age) = freshness(&response.headers) else {
            return;
        };
        if response.status.is_server_error() || self.capacity == 0 {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.capacity && !entries.contains_key(url) {
            entries.retain(|_, entry| entry.expires > now);
            if entries.len() >= self.capacity {
                let soonest = entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.expires)
                    .map(|(key, _)| key.clone());
                if let Some(key) = soonest {
                    entries.remove(&key);
                }
            }
        }
        entries.insert(
            url.to_owned(),
            Entry {
                response: response.clone(),
                expires: now + max_age,
            },
        );
    }
}

/// How long a response may be reused: its `Cache-Control: max-age`, unless it forbids reuse.
fn freshness(headers: &http::HeaderMap) -> Option<Duration> {
    if headers.contains_key(http::header::VARY) {
        return None;
    }
    let mut max_age = None;
    for value in headers.get_all(http::header::CACHE_CONTROL) {
        for directive in value.to_str().ok()?.split(',') {
            let directive = directive.trim().to_ascii_lowercase();
            if directive == "no-store" || directive == "no-cache" {
                return None;
            }
            if let Some(seconds) = directive.strip_prefix("max-age=") {
                max_age = seconds.trim_matches('"').parse::<u64>().ok();
            }
        }
    }
    max_age
        .filter(|seconds| *seconds > 0)
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(cache_control: &str) -> StoredResponse {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::CACHE_CONTROL, cache_control.parse().unwrap());
        StoredResponse {
            status: http::StatusCode::NOT_FOUND,
            headers,
            body: Bytes::from_static(b"absent"),
        }
    }

    #[test]
    fn only_responses_with_max_age_are_kept() {
        let cache = ResponseCache::new(8);
        cache.store("http://a/", &response("max-age=60"));
        cache.store("http://b/", &response("no-store, max-age=60"));
        cache.store("http://c/", &response("private"));
        cache.store("http://d/", &response("max-age=0"));
        assert_eq!(cache.get("http://a/").unwrap().body, "absent");
        for url in ["http://b/", "http://c/", "http://d/"] {
            assert!(cache.get(url).is_none(), "{url}");
        }
        let mut varying = response("max-age=60");
        varying
            .headers
            .insert(http::header::VARY, "accept".parse().unwrap());
        cache.store("http://e/", &varying);
        assert!(cache.get("http://e/").is_none());
        let mut failed = response("max-age=60");
        failed.status = http::StatusCode::BAD_GATEWAY;
        cache.store("http://f/", &failed);
        assert!(cache.get("http://f/").is_none());
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity() {
        let cache = ResponseCache::new(2);
        for url in ["http://a/", "http://b/", "http://c/"] {
            cache.store(url, &response("max-age=60"));
        }
        let kept = ["http://a/", "http://b/", "http://c/"]
            .iter()
            .filter(|url| cache.get(url).is_some())
            .count();
        assert_eq!(kept, 2);
        assert!(cache.get("http://c/").is_some(), "the newest entry is kept");
    }

    #[tokio::test]
    async fn a_second_asker_waits_for_the_fetch_under_way() {
        let cache = Arc::new(ResponseCache::new(8));
        let Err(Some(turn)) = cache.get_or_turn("http://a/").await else {
            panic!("the first asker fetches");
        };
        let waiter = tokio::spawn({
            let cache = Arc::clone(&cache);
            async move { cache.get_or_turn("http://a/").await.map(|hit| hit.body) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second asker waits");
        cache.store("http://a/", &response("max-age=60"));
        drop(turn);
        assert_eq!(waiter.await.unwrap().ok().unwrap(), "absent");
    }
}
