//! `sluice-llm-sim`: a simulated OpenAI-compatible streaming LLM server
//! (its command line: [`sluice_llm_sim::cli`]).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match sluice_llm_sim::cli::run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice-llm-sim: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
