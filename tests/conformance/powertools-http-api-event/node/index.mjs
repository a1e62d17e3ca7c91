import { APIGatewayProxyEventV2Schema } from '@aws-lambda-powertools/parser/schemas/api-gatewayv2';

export const handler = async (event) => {
  const result = APIGatewayProxyEventV2Schema.safeParse(event);
  if (!result.success) {
    return { success: false, issues: result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) };
  }
  const e = result.data;
  return {
    success: true,
    issues: [],
    parsed: {
      accountId: e.requestContext.accountId,
      method: e.requestContext.http.method,
      rawPath: e.rawPath,
      cookies: e.cookies,
      signature: e.headers['x-hub-signature'],
    },
  };
};
