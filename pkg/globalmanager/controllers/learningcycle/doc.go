// Package learningcycle is the learning cycle that IncrementalLearningJobs and
// LifelongLearningJobs share: rounds of train, eval and deploy, one after the
// other, for as long as the job exists. The controller of each kind is this
// package's Controller with the kind's decisions (Kind): which models and
// environment each worker gets, whether an evaluated round is deployed, and
// how.
//
// # Where a job stands
//
// The status says it, and the status is the state machine: both the
// controller's sync and the reports the edge forwards move it.
//
//   - round: the round in progress, from 1.
//   - stage: Train, Eval or Deploy.
//   - state: Waiting (the train trigger has not fired), Ready (the stage may
//     start: its pod is about to be created, or the edge is to deploy),
//     Starting (its pod exists), Running, or Failed (the job is over).
//   - attempt: the try of the stage, from 1; 0 while waiting.
//   - currentRound: the round's data (trainDatasetURL, testDatasetURL, the
//     numberOfSamples it was prepared from), the models it trained and their
//     evaluation metrics, and the deploy decision's sentence.
//   - history: finished rounds, oldest first, each with its result
//     (Deployed, NotDeployed or Failed) and why; at most the GlobalManager's
//     --cycle-history-limit (10).
//   - deployedRound: the round whose model the inference worker serves (0:
//     the initial model); inferenceWorker: that worker's pod.
//   - conditions: the transitions of the current round only, oldest first,
//     each with its time (at most 20); history keeps the rest.
//   - edgeNodes: what the cloud last heard from the dataset's node.
//
// Events say the same as it happens: Started, StageStarting, StageRetry,
// RoundDeployed, RoundNotDeployed, JobFailed, MissingReference; an incremental
// job with hot update also ModelHotUpdated or ModelHotUpdateFailed when its
// inference worker says it loaded the deployed model, or could not.
//
// # A round
//
//  1. A new job starts at round 1, Train/Waiting, and gets its inference
//     worker, pod <job>-deploy-0, which serves the initial model.
//  2. The train trigger is the edge's: the LocalController of the dataset's
//     node counts new samples (spec.trainSpec.trigger), splits them into the
//     round's train and test data (spec.dataset.trainProb) on the node, and
//     reports the round ready. The job goes to Train/Ready, try 1. A report
//     about another round, or one that arrives again, changes nothing. A
//     report under the LocalController's name from another node, or naming
//     round data outside spec.outputDir, is refused: those paths are mounted
//     into the round's pods.
//  3. The train worker runs in pod <job>-train-<round>-<try>, built from the
//     current spec.trainSpec.template; the job goes to Starting, then Running
//     when the pod runs or the worker says so. It reports completed with the
//     models it wrote ({"format","url"} results); the job goes to Eval/Ready.
//     Models outside spec.outputDir, or more than MaxRoundModels, fail the
//     try instead.
//  4. The eval worker, pod <job>-eval-<round>-<try>, evaluates the new model
//     and the deployed one (MODEL_URLS, new first) and reports completed
//     with one result per model. The new model's metrics are recorded in
//     currentRound.models. The kind decides whether to deploy: an
//     incremental job applies spec.deploySpec.trigger (below); a lifelong job
//     deploys every round. Not deployed: the round ends NotDeployed and the
//     next round waits for its trigger. Deployed: Deploy/Ready.
//  5. Deploy. Incremental: the LocalController of the dataset's node copies
//     the new model over the deploy Model's file and reports it; the deploy
//     Model's status gets the new model's metrics and updateTime. With
//     spec.deploySpec.model.hotUpdateEnabled the inference worker reloads the
//     file (MODEL_HOT_UPDATE=true) and its pod is kept; otherwise a new
//     inference worker, <job>-deploy-<round>, replaces the old one. Lifelong:
//     the controller itself deploys by replacing the inference worker with
//     <job>-deploy-<round>, which serves the round's knowledge base
//     (MODEL_URLS). Either way the round ends Deployed, deployedRound is
//     the round, and the next round waits for its trigger.
//
// # Failures
//
// A try fails when its worker reports failed (or a train worker reports no
// model), when its pod ends Failed, when its pod ends Succeeded and the
// worker's completed report does not come within the report grace (see
// reportGraceLeft: --stage-report-grace while the edge link is up). A
// deploy the edge reports failed (its LocalController retried the copy with
// backoff for --deploy-retry-for first) ends the round Failed with the
// reason, and the next round waits for its trigger: the job goes on. The stage is tried again, as a new pod with the next try's name, up
// to the GlobalManager's --stage-attempts (3) tries; then the job fails:
// state Failed, completionTime set, the round in the history as Failed, and
// nothing is created any more (the inference worker is left running, but not
// recreated). A pod deleted by hand comes back, once, while the job goes on;
// a job being deleted is never acted on.
//
// # Pods
//
// Train and eval workers run on the dataset's node (unless their template
// places them), where the data is and whose LocalController they report to;
// node paths (the dataset, the round's data and output folder, the models)
// are mounted under DATA_PATH_PREFIX. Each stage's pod is built from the spec
// as it is when the stage starts, so a spec edit takes effect at the next
// stage; a running stage pod is not replaced, nor is the inference worker
// before the next deploy. A try's pod still running when a later try replaced
// it, or when the job failed, is deleted; a pod whose worker reported
// completed exits by itself and keeps its logs. Stage pods of rounds before
// the previous one are deleted, so a long-lived job keeps a bounded number.
//
// # The deploy trigger
//
// spec.deploySpec.trigger.condition compares a metric of the evaluation with
// a threshold (EvaluateCondition). The metric is the new model's (the first
// result's metrics); a name ending in _delta that the results do not carry is
// the new model's value of the base metric minus the deployed model's. A
// number deploys when `value operator threshold`. A list (per-class values,
// such as precision_delta) deploys only when it is not empty and every
// element satisfies the comparison: a deploy replaces a working model, so the
// new one must be better for every class, not on average. A missing or
// non-numeric metric does not deploy. The round's message says what was
// compared and the decision, for example "precision_delta [0.15,-0.02] is
// not > 0.1 for element 1: not deploying".
//
// # Worker environment
//
// Every worker: NAMESPACE, JOB_NAME, WORKER_NAME (its pod), LC_SERVER,
// LOG_LEVEL, DATA_PATH_PREFIX, and the S3 credentials of spec.credentialName.
// Train: ORIGINAL_DATASET_URL, TRAIN_DATASET_URL, OUTPUT_URL
// (<outputDir>/round-<R>/train). Eval: ORIGINAL_DATASET_URL,
// TEST_DATASET_URL, OUTPUT_URL (<outputDir>/round-<R>/eval). The kinds add
// their models (incremental: BASE_MODEL_URL, MODEL_URL, MODEL_URLS,
// MODEL_NAME, MODEL_HOT_UPDATE and, with hot update, its config file and
// poll period, HEM_NAME, HEM_PARAMETERS) or knowledge base (lifelong:
// CLOUD_KB_INDEX, MODEL_URLS, HAS_COMPLETED_INITIAL_TRAINING, KB_SERVER), as
// Sedna's library reads them (docs/kinds.md has the table).
package learningcycle
