import path from 'node:path';

export const handler = async () => path.sep;
