//! The label selectors the operator is started with (which ConfigMaps are checks, which objects it gates)
//! are read by the API server, which alone says what it accepts. One it cannot parse would fail every list
//! of the watch it belongs to, which would retry it for ever while the operator never became ready; so each
//! is tried once, before anything is watched, and a selector the API server refuses stops the start.

use crate::error::Error;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};

/// Lists at most one ConfigMap's metadata in `namespace` (every namespace: `None`) with each selector
/// (named for messages); the API server's `400 Bad Request` refuses it. Any other failure (no permission,
/// no connection) is left to the watches, which report and retry it.
pub(crate) async fn refuse_unreadable(
    client: &Client,
    namespace: Option<&str>,
    selectors: &[(&'static str, &str)],
) -> Result<(), Error> {
    let api: Api<ConfigMap> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    for (name, selector) in selectors {
        let probe = ListParams::default().labels(selector).limit(1);
        match api.list_metadata(&probe).await {
            Err(kube::Error::Api(status)) if status.code == 400 => {
                return Err(Error::Selector {
                    name,
                    selector: (*selector).to_owned(),
                    problem: status.message,
                });
            }
            Ok(_) | Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::json;
    use tower_test::mock;

    /// Answers the probes: 400 with the API server's message for a selector holding `===`, an empty list
    /// otherwise; returns the selectors asked for.
    async fn api_server(mut handle: mock::Handle<Request<Body>, Response<Body>>) -> Vec<String> {
        let mut asked = Vec::new();
        while let Some((request, respond)) = handle.next_request().await {
            let query = request.uri().query().unwrap_or_default().to_owned();
            assert_eq!(request.uri().path(), "/api/v1/namespaces/ops/configmaps");
            assert!(query.contains("limit=1"), "{query}");
            let (status, body) = if query.contains("%3D%3D%3D") {
                let message = "found '==', expected: !, identifier, or 'end of string'";
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": message, "reason": "BadRequest", "code": 400});
                (StatusCode::BAD_REQUEST, status)
            } else {
                let list = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                    "metadata": {"resourceVersion": "1"}, "items": []});
                (StatusCode::OK, list)
            };
            asked.push(query);
            let body = Body::from(serde_json::to_vec(&body).unwrap());
            respond.send_response(Response::builder().status(status).body(body).unwrap());
        }
        asked
    }

    #[tokio::test]
    async fn a_selector_the_api_server_cannot_parse_stops_the_start_naming_it() {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(api_server(handle));
        let client = Client::new(service, "ops");
        let selectors = [
            ("check selector", "preflight.dev/gates"),
            ("watch selector", "==="),
        ];
        let refused = refuse_unreadable(&client, Some("ops"), &selectors)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            refused,
            "the watch selector \"===\" is not a label selector the API server reads: \
             found '==', expected: !, identifier, or 'end of string'"
        );
        let readable = [
            ("check selector", "preflight.dev/gates"),
            ("watch selector", "shard=a"),
        ];
        refuse_unreadable(&client, Some("ops"), &readable)
            .await
            .unwrap();
        drop(client);
        assert_eq!(
            server.await.unwrap().len(),
            4,
            "each selector is tried once"
        );
    }
}
