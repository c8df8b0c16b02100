/** The harness kind and version recorded on every run; a manifest's `kernel.compatible` range is checked against it on resume. */
export const KERNEL = { name: 'berth', version: '0.1.0' } as const;
