/** A Kubernetes `Status`: errors from the cluster are passed through in this shape, with the cluster's status code. */
export class KubernetesStatusDto {
  /** `Status` */
  kind: string;
  apiVersion: string;
  /** `Failure` or `Success` */
  status: string;
  message?: string;
  /** e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Invalid` */
  reason?: string;
  details?: Record<string, unknown>;
  code: number;
}
