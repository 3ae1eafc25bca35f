//! API errors said for people. kube's `Display` of an answer of the API server ends with the debug form of
//! the whole `Status` (`ApiError: … (Status { status: Some(Failure), code: 403, … })`), which would reach
//! Events, conditions and the CLI as it is. People need the API server's own message and its code.

/// `error` as people read it: for an answer of the API server, its message and code (`secrets "x" is
/// forbidden: … (403)`); for anything else (a connection that failed, say), kube's own description.
pub(crate) fn api_answer(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn an_answer_of_the_api_server_is_its_message_and_code() {
        let forbidden =
            "secrets \"deps-token\" is forbidden: User \"x\" cannot get resource \"secrets\"";
        let status = Status::failure(forbidden, "Forbidden").with_code(403);
        let said = api_answer(&kube::Error::Api(Box::new(status)));
        assert_eq!(said, format!("{forbidden} (403)"));
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(api_answer(&other), other.to_string());
    }
}
