/**
 * The gateway renders its `MotorError`s with the frame's `renderError`; extra headers (`retry-after`,
 * `www-authenticate`) go as its leading headers, ahead of `content-type` as they always were.
 */
export { renderError } from '../../common/http-error.js';
