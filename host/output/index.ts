export { OutputWriter, OUTPUT_CAP_BYTES, TAIL_CHARS, type OutputWriterOptions } from './output-writer';
export { attemptsOf, attemptState, type OutputAttempt, type OutputPart, type AttemptState } from './attempts';
export { AttemptTracker, type OutputEvent, type InterruptedEvent, type FollowedOutput } from './output-follow';
