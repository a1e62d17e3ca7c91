import { APIGatewayProxyEventSchema } from '@aws-lambda-powertools/parser/schemas/api-gateway';

export const handler = async (event) => {
  const result = APIGatewayProxyEventSchema.safeParse(event);
  if (!result.success) {
    return { success: false, issues: result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) };
  }
  const rc = result.data.requestContext;
  return {
    success: true,
    issues: [],
    parsed: {
      accountId: rc.accountId,
      apiId: rc.apiId,
      resourceId: rc.resourceId,
      requestTimeEpochIsNumber: typeof rc.requestTimeEpoch === 'number',
      sourceIp: rc.identity.sourceIp,
      signature: result.data.headers['X-Hub-Signature'],
    },
  };
};
